module gcbench/bindings_go

go 1.19

require groupcast v0.0.0

replace groupcast => ../../bindings/go
