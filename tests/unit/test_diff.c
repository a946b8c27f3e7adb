/* The one diff writer's line diff and name quoting: hunks that a patch
 * applier (written here from the unified format's rules, as GNU patch reads
 * them) turns back into the new text, byte for byte, for random texts with
 * and without a final newline, texts that differ a great deal (past the
 * search's budget), and hunk headers as diff -u writes them. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "unit.h"
#include "workspace/diff.h"

typedef struct pline {
	char kind;            /* ' ', '-', '+' */
	const char *p;
	size_t len;           /* with its newline unless "\ No newline" follows */
} pline;

/* The lines of old from the patch's hunks: returns the new text. */
static char *apply_hunks(const char *old, size_t olen, const char *patch, size_t *outlen)
{
	static const char *ol[100000];
	static size_t oll[100000];
	size_t on = 0;
	for (size_t i = 0, s = 0; i < olen; i++)
		if (old[i] == '\n' || i + 1 == olen) {
			ol[on] = old + s;
			oll[on++] = i + 1 - s;
			s = i + 1;
		}
	buf out = { 0 };
	size_t oi = 0;
	const char *p = patch;
	while (*p) {
		ck_assert_msg(!strncmp(p, "@@ -", 4), "a hunk header, not '%.20s'", p);
		unsigned long s = strtoul(p + 4, (char **) &p, 10), l = 1;
		if (*p == ',')
			l = strtoul(p + 1, (char **) &p, 10);
		size_t start = l ? s - 1 : s;
		ck_assert_uint_ge(start, oi);
		for (; oi < start; oi++)
			buf_append(&out, ol[oi], oll[oi]);
		p = strchr(p, '\n') + 1;
		while (*p == ' ' || *p == '-' || *p == '+') {
			pline pl = { *p, p + 1, 0 };
			const char *nl = strchr(p, '\n');
			pl.len = (size_t) (nl - pl.p) + 1;
			p = nl + 1;
			if (!strncmp(p, "\\ No newline at end of file\n", 28)) {
				pl.len--;
				p += 28;
			}
			if (pl.kind != '+') {
				ck_assert_uint_lt(oi, on);
				ck_assert_msg(oll[oi] == pl.len && !memcmp(ol[oi], pl.p, pl.len), "context or removal matches");
				if (pl.kind == ' ')
					buf_append(&out, pl.p, pl.len);
				oi++;
			} else {
				buf_append(&out, pl.p, pl.len);
			}
		}
	}
	for (; oi < on; oi++)
		buf_append(&out, ol[oi], oll[oi]);
	*outlen = out.len;
	if (!out.data)
		buf_puts(&out, "");
	return buf_steal(&out);
}

static void roundtrip(const char *a, size_t alen, const char *b, size_t blen)
{
	buf d = { 0 };
	ck_assert_int_eq(diff_hunks(&d, a, alen, b, blen, false), 0);
	size_t n = 0;
	char *got = apply_hunks(a, alen, d.data ? d.data : "", &n);
	ck_assert_msg(n == blen && !memcmp(got, b, blen), "the hunks give the new text back");
	free(got);
	buf_free(&d);
}

/* A random text of lines over a small alphabet (so that lines repeat). */
static size_t random_text(char *out, unsigned *seed, size_t lines, bool final_nl)
{
	size_t len = 0;
	for (size_t i = 0; i < lines; i++) {
		int k = rand_r(seed) % 6;
		for (int j = 0; j <= k % 3; j++)
			out[len++] = (char) ('a' + k);
		if (i + 1 < lines || final_nl)
			out[len++] = '\n';
	}
	return len;
}

/* b from a: some lines dropped, some inserted, the end's newline maybe. */
static size_t mutate(const char *a, size_t alen, char *b, unsigned *seed)
{
	size_t len = 0;
	for (size_t i = 0; i < alen;) {
		size_t e = i;
		while (e < alen && a[e] != '\n')
			e++;
		e += e < alen;
		int r = rand_r(seed) % 10;
		if (r != 0)
			memcpy(b + len, a + i, e - i), len += e - i;
		if (r == 1 || r == 2) {
			b[len++] = (char) ('a' + rand_r(seed) % 8);
			b[len++] = '\n';
		}
		i = e;
	}
	if (len && rand_r(seed) % 4 == 0)
		len -= b[len - 1] == '\n';
	return len;
}

START_TEST(random_pairs)
{
	unsigned seed = 12345;
	static char a[8192], b[16384];
	for (int i = 0; i < 3000; i++) {
		size_t alen = random_text(a, &seed, (size_t) (rand_r(&seed) % 60), rand_r(&seed) % 3 != 0);
		size_t blen = i % 3 ? mutate(a, alen, b, &seed) : random_text(b, &seed, (size_t) (rand_r(&seed) % 60), i % 2);
		roundtrip(a, alen, b, blen);
	}
}
END_TEST

START_TEST(edges)
{
	roundtrip("", 0, "x\n", 2);
	roundtrip("x\n", 2, "", 0);
	roundtrip("x", 1, "x\n", 2);
	roundtrip("x\n", 2, "x", 1);
	roundtrip("a\nb\nc", 5, "a\nb\nc", 5);
	buf d = { 0 };
	ck_assert_int_eq(diff_hunks(&d, "a\nb\nc\n", 6, "a\nb\nc\n", 6, false), 0);
	ck_assert_ptr_null(d.data);   /* the same text: no hunk at all */
	ck_assert_int_eq(diff_hunks(&d, "", 0, "new\n", 4, false), 0);
	ck_assert_str_eq(d.data, "@@ -0,0 +1 @@\n+new\n");
	buf_free(&d);
	ck_assert_int_eq(diff_hunks(&d, "one\ntwo\n", 8, "one\ntwo", 7, false), 0);
	ck_assert_str_eq(d.data, "@@ -1,2 +1,2 @@\n one\n-two\n+two\n\\ No newline at end of file\n");
	buf_free(&d);
	/* Two changes far apart: two hunks of three lines of context each. */
	ck_assert_int_eq(diff_hunks(&d, "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", 27,
	                            "1\nX\n3\n4\n5\n6\n7\n8\n9\n10\nY\n12\n", 26, false), 0);
	ck_assert_str_eq(d.data, "@@ -1,5 +1,5 @@\n 1\n-2\n+X\n 3\n 4\n 5\n"
	                         "@@ -8,5 +8,5 @@\n 8\n 9\n 10\n-11\n+Y\n 12\n");
	buf_free(&d);
	/* Escaped for a terminal: controls (but tab) as \xNN, C1 too. */
	ck_assert_int_eq(diff_hunks(&d, "", 0, "a\tb\033[2J\302\233c\r\n", 12, true), 0);
	ck_assert_str_eq(d.data, "@@ -0,0 +1 @@\n+a\tb\\x1b[2J\\xc2\\x9bc\\x0d\n");
	buf_free(&d);
}
END_TEST

/* Texts that differ everywhere, long enough to spend the search's budget:
 * still a correct diff. */
START_TEST(budget)
{
	size_t n = 40000;
	char *a = malloc(n * 8), *b = malloc(n * 8);
	size_t alen = 0, blen = 0;
	unsigned seed = 7;
	for (size_t i = 0; i < n; i++) {
		alen += (size_t) sprintf(a + alen, "%u\n", rand_r(&seed) % 1000);
		blen += (size_t) sprintf(b + blen, "%u\n", rand_r(&seed) % 1000);
	}
	roundtrip(a, alen, b, blen);
	free(a);
	free(b);
}
END_TEST

START_TEST(quoting)
{
	buf q = { 0 };
	diff_quote_name(&q, "a/", "plain name.txt");
	ck_assert_str_eq(q.data, "a/plain name.txt");
	buf_free(&q);
	diff_quote_name(&q, "b/", "t\033]0;x\a\"\\\n\xe2\x80\xae");
	ck_assert_str_eq(q.data, "\"b/t\\033]0;x\\a\\\"\\\\\\n\\342\\200\\256\"");
	buf_free(&q);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("diff");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, random_pairs);
	tcase_add_test(tc, edges);
	tcase_add_test(tc, budget);
	tcase_add_test(tc, quoting);
	return unit_run("diff", tc);
}
