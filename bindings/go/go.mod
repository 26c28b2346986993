module groupcast

go 1.19
