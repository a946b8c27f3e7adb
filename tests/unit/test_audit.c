/* SHA-256 against the FIPS 180-4 / NIST vectors (the digests in audit lines
 * and artifact names), padding edges included, and module matching of the
 * import gate (a module or its submodules, never a name that only starts
 * the same). */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "nsbox.h"
#include "image/image_digest.h"
#include "base/sha256.h"
#include "unit.h"

static const struct { const char *in; const char *hex; } vectors[] = {
	{ "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
	{ "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
	{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
	  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
	{ "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
	  "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1" },
};

START_TEST(test_vectors)
{
	char hex[65];
	sha256_hex(vectors[_i].in, strlen(vectors[_i].in), hex);
	ck_assert_str_eq(hex, vectors[_i].hex);
}
END_TEST

START_TEST(test_million_a)
{
	static char a[1000000];
	memset(a, 'a', sizeof(a));
	char hex[65];
	sha256_hex(a, sizeof(a), hex);
	ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

/* Fed in pieces of every size, the digest is the one-shot one. */
START_TEST(test_streamed)
{
	static char data[1000];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char) (i * 7 + 3);
	char want[65], got[65];
	for (size_t len = 0; len <= 200; len += 13) {
		sha256_hex(data, len, want);
		for (size_t piece = 1; piece <= 70; piece += 3) {
			sha256_ctx c;
			sha256_init(&c);
			for (size_t off = 0; off < len; off += piece)
				sha256_update(&c, data + off, off + piece <= len ? piece : len - off);
			sha256_final_hex(&c, got);
			ck_assert_str_eq(got, want);
		}
	}
}
END_TEST

START_TEST(test_meta_digest)
{
	char d[IMAGE_DIGEST_LEN];
	const char *good = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
	char meta[256];
	snprintf(meta, sizeof(meta), "{\"name\":\"x\",\"digest\":\"%s\",\"source\":\"y\"}", good);
	ck_assert(image_meta_digest_of(meta, d));
	ck_assert_str_eq(d, good);
	ck_assert(!image_meta_digest_of("{\"name\":\"x\"}", d));
	ck_assert(!image_meta_digest_of("{\"digest\":\"sha256:abc\"}", d));
	ck_assert(!image_meta_digest_of("{\"digest\":\"sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD\"}", d));
	ck_assert(!image_meta_digest_of("{\"digest\":\"md5:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f200\"}", d));
	ck_assert(!image_meta_digest_of("{\"digest\":\"sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad0\"}", d));
}
END_TEST

static const struct { const char *mod, *blocked; bool match; } matches[] = {
	{ "os", "os", true }, { "os.path", "os", true }, { "osx", "os", false },
	{ "o", "os", false }, { "json.decoder", "json", true }, { "jsonschema", "json", false },
	{ "os", "os.path", false }, { "os.path", "os.path", true }, { "x", "", false },
};

START_TEST(test_matches)
{
	ck_assert_msg(nsbox_import_gate_matches(matches[_i].mod, matches[_i].blocked) == matches[_i].match,
	              "'%s' against '%s'", matches[_i].mod, matches[_i].blocked);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("audit");
	tcase_add_loop_test(tc, test_vectors, 0, sizeof(vectors) / sizeof(vectors[0]));
	tcase_add_test(tc, test_million_a);
	tcase_add_test(tc, test_streamed);
	tcase_add_test(tc, test_meta_digest);
	tcase_add_loop_test(tc, test_matches, 0, sizeof(matches) / sizeof(matches[0]));
	return unit_run("audit", tc);
}
