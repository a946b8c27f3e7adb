/* Seccomp profiles: nsbox's YAML format, or (built with FUZZ_JSON) the
 * Docker/OCI JSON format, parsed and compiled to BPF as `--seccomp FILE`
 * does. A profile that parses must compile to filters the kernel can take
 * (at most BPF_MAXINSNS instructions a layer), or fail with an error. */
#include <linux/filter.h>
#include <string.h>

#include "fuzz.h"
#include "seccomp/seccomp.h"
#include "seccomp/seccomp_profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > (1 << 20))
		return 0;   /* what sc_profile_load_text reads at most */
#ifdef FUZZ_JSON
	if (!size || data[0] != '{')
		return 0;
#endif
	char *text = fuzz_cstr(data, size);
	sc_profile *p = NULL;
	nsbox_error *err = NULL;
	if (sc_profile_parse(text, size, "fuzz", &p, &err) < 0) {
		FUZZ_CHECK(err && *nsbox_error_message(err));
		goto out;
	}
	FUZZ_CHECK(p && p->name);
	sc_answers answers;
	if (sc_answers_build(p, &answers) == 0) {
		for (size_t i = 0; i < answers.n; i++)
			FUZZ_CHECK(sc_answer_for(&answers, answers.v[i].nr) > 0);
		free(answers.v);
	}
	for (int notify = 0; notify < 2; notify++) {
		sc_bpf bpf;
		if (sc_compile(p, notify, &bpf, &err) < 0) {
			FUZZ_CHECK(err && *nsbox_error_message(err));
			nsbox_error_free(err);
			err = NULL;
			continue;
		}
		FUZZ_CHECK(bpf.n >= 1 && bpf.n <= 2);
		for (int i = 0; i < bpf.n; i++)
			FUZZ_CHECK(bpf.layers[i].insns && bpf.layers[i].len > 0 && bpf.layers[i].len <= BPF_MAXINSNS);
		sc_bpf_free(&bpf);
	}
out:
	nsbox_error_free(err);
	sc_profile_free(p);
	free(text);
	return 0;
}
