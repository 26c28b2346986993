/* SPDX-License-Identifier: MIT */
/* sized.c - copying a sized struct across the API (gc_sized_in(),
 * gc_sized_out()); the rule is in include/groupcast/common.h. */
#include <errno.h>
#include <string.h>
#include "core/core.h"

/* The caller's sz; EINVAL below what 1.0 had. */
static int check_sz(const struct gc_sized *t, const char *fn, const char *arg, size_t sz)
{
	if (sz < t->v1)
		return gc_errf(EINVAL, "%s: %s->sz %zu: below the %zu bytes of struct %s in 1.0; use %s()",
			       fn, arg, sz, t->v1, t->name, t->init);
	return 0;
}

int gc_sized_in(const struct gc_sized *t, const char *fn, const char *arg, void *dst, const void *src)
{
	memset(dst, 0, t->size);
	if (!src)
		return 0;
	size_t sz;
	memcpy(&sz, src, sizeof(sz));
	int r = check_sz(t, fn, arg, sz);
	if (r < 0)
		return r;
	/* past sizeof: a newer header's fields (the padding before is not
	 * one: fields are never appended into it, core.h) */
	const unsigned char *s = src;
	for (size_t i = t->size; i < sz; i++)
		if (s[i])
			return gc_errf(E2BIG,
				       "%s: %s->sz %zu: byte %zu is not zero, past the %zu bytes of "
				       "struct %s this library knows (a field it would ignore)",
				       fn, arg, sz, i, t->size, t->name);
	memcpy(dst, src, sz < t->known ? sz : t->known);
	return 0;
}

int gc_sized_out(const struct gc_sized *t, const char *fn, const char *arg, void *dst, const void *src)
{
	if (!dst)
		return gc_errf(EFAULT, "%s: %s is NULL", fn, arg);
	size_t sz;
	memcpy(&sz, dst, sizeof(sz));
	int r = check_sz(t, fn, arg, sz);
	if (r < 0)
		return r;
	size_t n = sz < t->known ? sz : t->known;
	/* the caller's sz stays: copy what follows it */
	memcpy((unsigned char *)dst + sizeof(size_t), (const unsigned char *)src + sizeof(size_t),
	       n - sizeof(size_t));
	if (sz > t->known)
		memset((unsigned char *)dst + t->known, 0, sz - t->known);
	return 0;
}
