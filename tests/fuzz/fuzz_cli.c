/* `nsbox run`'s command line and NSBOX_* variables: the input is split at
 * NUL bytes into arguments (NSBOX_*=... ones form the environment), parsed
 * as the CLI does, and every resulting setting applied to a configuration
 * as run.c's build_config does (the policy file it names is not read).
 * The same arguments then as `nsbox docker run`'s (run_opts.c), whose
 * settings go through the same configuration. */
#include <ctype.h>
#include <string.h>

#include "args.h"
#include "docker/docker.h"
#include "fuzz.h"
#include "nsbox.h"

#define MAX_ARGS 64

/* An error message shows the user's words and our own, nothing else: no
 * control character that none of the arguments had. */
static void check_message(const char *msg, char **argv, int argc)
{
	for (const unsigned char *p = (const unsigned char *) msg; *p; p++) {
		if (*p >= 0x20 && *p < 0x7f)
			continue;
		bool from_arg = false;
		for (int i = 0; i < argc && !from_arg; i++)
			from_arg = strchr(argv[i], *p) != NULL;
		if (!from_arg) {
			fprintf(stderr, "byte 0x%02x in the message '%s' comes from no argument\n", *p, msg);
			abort();
		}
	}
}

/* Every setting of a parse through a configuration: accepted, or refused
 * with a message. */
static void apply(const setting *settings, size_t n)
{
	nsbox_config *cfg = NULL;
	nsbox_error *err = NULL;
	FUZZ_CHECK(nsbox_config_new(&cfg, NULL) == 0);
	int r = 0;
	for (size_t i = 0; r == 0 && i < n; i++)
		r = nsbox_config_set(cfg, settings[i].key, settings[i].value, settings[i].origin, &err);
	if (r < 0)
		FUZZ_CHECK(err && *nsbox_error_message(err));
	nsbox_error_free(err);
	nsbox_config_free(cfg);
}

static void parse_docker_run(int argc, char **argv, char **env)
{
	/* --env-file reads a file by name: not the fuzzer's (/dev/zero). */
	for (int i = 1; i < argc; i++)
		if (strstr(argv[i], "env-file"))
			return;
	docker_run d;
	char msg[1024] = "";
	if (docker_run_parse(argc, argv, env, &d, msg, sizeof(msg)) < 0) {
		FUZZ_CHECK(*msg);
		check_message(msg, argv, argc);
	} else if (!d.help) {
		FUZZ_CHECK(d.image && d.argc >= 0 && (d.argc > 0 || d.entrypoint));
		for (size_t i = 0; i < d.a.n_settings; i++)
			FUZZ_CHECK(d.a.settings[i].key && d.a.settings[i].value && d.a.settings[i].origin);
		apply(d.a.settings, d.a.n_settings);
	}
	docker_run_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 8192)
		return 0;
	char *copy = fuzz_cstr(data, size);
	char *argv[MAX_ARGS + 2], *env[MAX_ARGS + 1];
	int argc = 0, envc = 0;
	argv[argc++] = "run";
	const uint8_t *rest = (const uint8_t *) copy, *piece;
	size_t left = size, len;
	while (argc < MAX_ARGS && envc < MAX_ARGS && fuzz_next(&rest, &left, 0, &piece, &len)) {
		char *s = (char *) piece;   /* NUL-terminated in place: copy has them */
		if (!strncmp(s, "NSBOX_", 6) && strchr(s, '='))
			env[envc++] = s;
		else
			argv[argc++] = s;
	}
	argv[argc] = NULL;
	env[envc] = NULL;
	for (int i = 1; i < argc; i++)
		(void) run_option_takes_value(argv[i]);
	parse_docker_run(argc, argv, env);
	run_args a;
	char msg[512] = "";
	if (parse_run_args(argc, argv, env, &a, msg, sizeof(msg)) < 0) {
		FUZZ_CHECK(*msg);
		check_message(msg, argv, argc);
		goto free_args;   /* the caller frees, as run.c does */
	}
	if (a.help)
		goto free_args;
	FUZZ_CHECK(a.argc >= 1 && a.argv && a.argv[0]);
	nsbox_config *cfg = NULL;
	nsbox_error *err = NULL;
	FUZZ_CHECK(nsbox_config_new(&cfg, NULL) == 0);
	int r = 0;
	for (size_t i = 0; r == 0 && i < a.n_settings; i++)
		r = nsbox_config_set(cfg, a.settings[i].key, a.settings[i].value, a.settings[i].origin, &err);
	if (r == 0)
		r = nsbox_config_set_command(cfg, a.argc, (const char *const *) a.argv, &err);
	if (r < 0) {
		FUZZ_CHECK(err && *nsbox_error_message(err));
	} else {
		char *yaml = NULL;
		FUZZ_CHECK(nsbox_config_to_yaml(cfg, &yaml, NULL) == 0 && yaml);
		free(yaml);
	}
	nsbox_error_free(err);
	nsbox_config_free(cfg);
free_args:
	run_args_free(&a);
	free(copy);
	return 0;
}
