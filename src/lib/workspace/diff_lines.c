/* The line diff of the one diff writer: Myers' O(ND) algorithm in linear
 * space (the middle snake, as in his paper and in diff-match-patch's
 * bisect), over lines interned to numbers, then grouped into unified hunks
 * with three lines of context. A line includes its newline, so "x" at the
 * end of a file without one differs from "x\n", which is what patch needs
 * to reproduce the file. The search has a work budget: past it, what is
 * left is written as "these lines go, those come", still a correct diff. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "workspace/diff.h"

/* Steps of the search (snake moves and diagonals tried) before the rest is
 * written as a replacement: a few tenths of a second at worst. */
#define DIFF_BUDGET 50000000L

typedef struct line {
	const char *p;
	size_t len;           /* with its newline, if it has one */
} line;

typedef struct text {
	line *v;
	size_t n;
} text;

static int split_lines(const char *s, size_t len, text *t)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += s[i] == '\n';
	if (len && s[len - 1] != '\n')
		n++;
	t->n = n;
	t->v = calloc(n ? n : 1, sizeof(*t->v));
	if (!t->v)
		return -ENOMEM;
	size_t k = 0, start = 0;
	for (size_t i = 0; i < len; i++)
		if (s[i] == '\n') {
			t->v[k++] = (line){ s + start, i + 1 - start };
			start = i + 1;
		}
	if (start < len)
		t->v[k++] = (line){ s + start, len - start };
	return 0;
}

static uint64_t hash_line(const line *l)
{
	uint64_t h = 1469598103934665603ull;   /* FNV-1a */
	for (size_t i = 0; i < l->len; i++)
		h = (h ^ (unsigned char) l->p[i]) * 1099511628211ull;
	return h;
}

/* Number every distinct line (of both texts) so that the search compares
 * integers: an open-addressing table of indices into `all`. */
static int intern(const text *a, const text *b, unsigned *ia, unsigned *ib)
{
	size_t total = a->n + b->n, cap = 16;
	while (cap < total * 2)
		cap <<= 1;
	typedef struct slot { const line *l; unsigned id; bool used; } slot;
	slot *tab = calloc(cap, sizeof(*tab));
	if (!tab)
		return -ENOMEM;
	unsigned next = 0;
	for (int side = 0; side < 2; side++) {
		const text *t = side ? b : a;
		unsigned *out = side ? ib : ia;
		for (size_t i = 0; i < t->n; i++) {
			const line *l = &t->v[i];
			size_t h = (size_t) hash_line(l) & (cap - 1);
			while (tab[h].used && (tab[h].l->len != l->len || memcmp(tab[h].l->p, l->p, l->len)))
				h = (h + 1) & (cap - 1);
			if (!tab[h].used)
				tab[h] = (slot){ l, next++, true };
			out[i] = tab[h].id;
		}
	}
	free(tab);
	return 0;
}

typedef struct search {
	const unsigned *a, *b;
	char *ca, *cb;        /* 1: the line is deleted (a) or inserted (b) */
	long *v1, *v2;
	long budget;
} search;

static void replace(search *s, size_t a0, size_t a1, size_t b0, size_t b1)
{
	memset(s->ca + a0, 1, a1 - a0);
	memset(s->cb + b0, 1, b1 - b0);
}

/* The middle snake of a[a0..a0+n) and b[b0..b0+m): where the shortest edit
 * script crosses its middle, as a split point (*x, *y) local to the box.
 * false: no split within the budget. */
static bool bisect(search *s, size_t a0, long n, size_t b0, long m, long *x, long *y)
{
	const unsigned *a = s->a + a0, *b = s->b + b0;
	long max_d = (n + m + 1) / 2, off = max_d, len = 2 * max_d + 2;
	long *v1 = s->v1, *v2 = s->v2;
	for (long i = 0; i < len; i++)
		v1[i] = v2[i] = -1;
	v1[off + 1] = v2[off + 1] = 0;
	long delta = n - m;
	bool front = (delta & 1) != 0;
	long k1start = 0, k1end = 0, k2start = 0, k2end = 0;
	for (long d = 0; d < max_d; d++) {
		if ((s->budget -= 2 * d + 2) < 0)
			return false;
		for (long k1 = -d + k1start; k1 <= d - k1end; k1 += 2) {
			long k1o = off + k1, x1;
			if (k1 == -d || (k1 != d && v1[k1o - 1] < v1[k1o + 1]))
				x1 = v1[k1o + 1];
			else
				x1 = v1[k1o - 1] + 1;
			long y1 = x1 - k1, x0 = x1;
			while (x1 < n && y1 < m && a[x1] == b[y1])
				x1++, y1++;
			s->budget -= x1 - x0;
			v1[k1o] = x1;
			if (x1 > n) {
				k1end += 2;
			} else if (y1 > m) {
				k1start += 2;
			} else if (front) {
				long k2o = off + delta - k1;
				if (k2o >= 0 && k2o < len && v2[k2o] != -1 && x1 >= n - v2[k2o]) {
					*x = x1;
					*y = y1;
					return true;
				}
			}
		}
		for (long k2 = -d + k2start; k2 <= d - k2end; k2 += 2) {
			long k2o = off + k2, x2;
			if (k2 == -d || (k2 != d && v2[k2o - 1] < v2[k2o + 1]))
				x2 = v2[k2o + 1];
			else
				x2 = v2[k2o - 1] + 1;
			long y2 = x2 - k2, x0 = x2;
			while (x2 < n && y2 < m && a[n - x2 - 1] == b[m - y2 - 1])
				x2++, y2++;
			s->budget -= x2 - x0;
			v2[k2o] = x2;
			if (x2 > n) {
				k2end += 2;
			} else if (y2 > m) {
				k2start += 2;
			} else if (!front) {
				long k1o = off + delta - k2;
				if (k1o >= 0 && k1o < len && v1[k1o] != -1) {
					long x1 = v1[k1o], y1 = off + x1 - k1o;
					if (x1 >= n - x2) {
						*x = x1;
						*y = y1;
						return true;
					}
				}
			}
		}
	}
	return false;
}

/* Mark what changes between a[a0..a1) and b[b0..b1): recursion on the first
 * half of each split (its depth is the logarithm of the edit distance), a
 * loop on the second. */
static void compare(search *s, size_t a0, size_t a1, size_t b0, size_t b1)
{
	for (;;) {
		while (a0 < a1 && b0 < b1 && s->a[a0] == s->b[b0])
			a0++, b0++;
		while (a0 < a1 && b0 < b1 && s->a[a1 - 1] == s->b[b1 - 1])
			a1--, b1--;
		long n = (long) (a1 - a0), m = (long) (b1 - b0), x, y;
		if (!n || !m || s->budget < 0 || !bisect(s, a0, n, b0, m, &x, &y) || (x == 0 && y == 0) ||
		    (x == n && y == m) || x < 0 || y < 0 || x > n || y > m) {
			replace(s, a0, a1, b0, b1);
			return;
		}
		compare(s, a0, a0 + (size_t) x, b0, b0 + (size_t) y);
		a0 += (size_t) x;
		b0 += (size_t) y;
	}
}

void diff_escape_line(buf *out, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *) s;
	for (size_t i = 0; i < len; i++) {
		bool c1 = p[i] == 0xc2 && i + 1 < len && p[i + 1] >= 0x80 && p[i + 1] <= 0x9f;
		if (c1) {
			buf_printf(out, "\\xc2\\x%02x", p[i + 1]);
			i++;
		} else if ((p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7f) {
			buf_printf(out, "\\x%02x", p[i]);
		} else {
			buf_append(out, p + i, 1);
		}
	}
}

static void emit(buf *out, char mark, const line *l, bool escape)
{
	bool nl = l->len && l->p[l->len - 1] == '\n';
	buf_append(out, &mark, 1);
	if (escape)
		diff_escape_line(out, l->p, l->len - nl);
	else
		buf_append(out, l->p, l->len - nl);
	buf_puts(out, nl ? "\n" : "\n\\ No newline at end of file\n");
}

/* A hunk's range as diff -u writes it: "start,count", the start alone for
 * one line, and for none the line before the place. */
static void range(buf *out, size_t start, size_t count)
{
	if (count == 1)
		buf_printf(out, "%zu", start + 1);
	else
		buf_printf(out, "%zu,%zu", count ? start + 1 : start, count);
}

typedef struct block {
	size_t a, na, b, nb;  /* a[a..a+na) goes, b[b..b+nb) comes */
} block;

static void hunks(buf *out, const text *ta, const text *tb, const block *bl, size_t nbl, bool escape)
{
	for (size_t s = 0; s < nbl;) {
		size_t e = s;
		while (e + 1 < nbl && bl[e + 1].a - (bl[e].a + bl[e].na) <= 2 * DIFF_CONTEXT)
			e++;
		size_t a0 = bl[s].a > DIFF_CONTEXT ? bl[s].a - DIFF_CONTEXT : 0;
		size_t b0 = bl[s].b - (bl[s].a - a0);
		size_t a_end = bl[e].a + bl[e].na + DIFF_CONTEXT;
		if (a_end > ta->n)
			a_end = ta->n;
		size_t b_end = bl[e].b + bl[e].nb + (a_end - (bl[e].a + bl[e].na));
		buf_puts(out, "@@ -");
		range(out, a0, a_end - a0);
		buf_puts(out, " +");
		range(out, b0, b_end - b0);
		buf_puts(out, " @@\n");
		size_t i = a0;
		for (size_t k = s; k <= e; k++) {
			for (; i < bl[k].a; i++)
				emit(out, ' ', &ta->v[i], escape);
			for (size_t j = 0; j < bl[k].na; j++)
				emit(out, '-', &ta->v[bl[k].a + j], escape);
			for (size_t j = 0; j < bl[k].nb; j++)
				emit(out, '+', &tb->v[bl[k].b + j], escape);
			i = bl[k].a + bl[k].na;
		}
		for (; i < a_end; i++)
			emit(out, ' ', &ta->v[i], escape);
		s = e + 1;
	}
}

int diff_hunks(buf *out, const char *a, size_t alen, const char *b, size_t blen, bool escape)
{
	text ta = { 0 }, tb = { 0 };
	unsigned *ia = NULL, *ib = NULL;
	search s = { .budget = DIFF_BUDGET };
	block *bl = NULL;
	int r = split_lines(a, alen, &ta);
	if (r == 0)
		r = split_lines(b, blen, &tb);
	size_t vlen = ta.n + tb.n + 4;
	if (r == 0) {
		ia = calloc(ta.n + 1, sizeof(*ia));
		ib = calloc(tb.n + 1, sizeof(*ib));
		s.ca = calloc(ta.n + 1, 1);
		s.cb = calloc(tb.n + 1, 1);
		s.v1 = malloc(vlen * sizeof(long));
		s.v2 = malloc(vlen * sizeof(long));
		if (!ia || !ib || !s.ca || !s.cb || !s.v1 || !s.v2)
			r = -ENOMEM;
	}
	if (r == 0)
		r = intern(&ta, &tb, ia, ib);
	size_t nbl = 0;
	if (r == 0) {
		s.a = ia;
		s.b = ib;
		compare(&s, 0, ta.n, 0, tb.n);
		/* The changed runs, each with what goes and what comes. */
		bl = calloc(ta.n + tb.n + 1, sizeof(*bl));
		if (!bl)
			r = -ENOMEM;
		for (size_t i = 0, j = 0; r == 0 && (i < ta.n || j < tb.n);) {
			if (i < ta.n && j < tb.n && !s.ca[i] && !s.cb[j]) {
				i++, j++;
				continue;
			}
			block k = { .a = i, .b = j };
			while (i < ta.n && (s.ca[i] || j >= tb.n))
				i++;
			while (j < tb.n && (s.cb[j] || i >= ta.n))
				j++;
			k.na = i - k.a;
			k.nb = j - k.b;
			bl[nbl++] = k;
		}
	}
	if (r == 0)
		hunks(out, &ta, &tb, bl, nbl, escape);
	free(bl);
	free(ia);
	free(ib);
	free(s.ca);
	free(s.cb);
	free(s.v1);
	free(s.v2);
	free(ta.v);
	free(tb.v);
	return r < 0 ? r : out->oom ? -ENOMEM : 0;
}

void diff_quote_name(buf *out, const char *prefix, const char *name)
{
	const unsigned char *p = (const unsigned char *) name;
	bool quote = false;
	for (size_t i = 0; p[i]; i++)
		quote |= p[i] < 0x20 || p[i] == 0x7f || p[i] >= 0x80 || p[i] == '"' || p[i] == '\\';
	if (!quote) {
		buf_puts(out, prefix);
		buf_puts(out, name);
		return;
	}
	buf_puts(out, "\"");
	buf_puts(out, prefix);
	for (size_t i = 0; p[i]; i++) {
		static const char from[] = "\a\b\t\n\v\f\r\"\\", to[] = "abtnvfr\"\\";
		const char *c = p[i] ? strchr(from, p[i]) : NULL;
		if (c)
			buf_printf(out, "\\%c", to[c - from]);
		else if (p[i] < 0x20 || p[i] >= 0x7f)
			buf_printf(out, "\\%03o", p[i]);
		else
			buf_append(out, p + i, 1);
	}
	buf_puts(out, "\"");
}
