/* `nsbox process ls|logs|kill|wait NAME ...`: the background processes of
 * a started sandbox (nsbox exec --detach), by id, through the library's
 * nsbox_process_* on a handle of the sandbox. */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "live/live_cli.h"

static const char usage[] =
	"Usage: nsbox process ls NAME [--json]\n"
	"       nsbox process logs NAME ID [--stderr]\n"
	"       nsbox process kill NAME ID [SIGNAL]\n"
	"       nsbox process wait NAME ID [--timeout D] [--json]\n"
	"The background processes of sandbox NAME (nsbox exec --detach NAME -- CMD prints\n"
	"an ID). logs: the last output kept (1 MiB a stream); kill: SIGTERM by default\n"
	"(a name, TERM or SIGTERM, or a number); wait: until it ends, then its exit status\n"
	"(and with --json its record). They end with the sandbox.\n";

static int sig_of(const char *s)
{
	static const struct { const char *n; int s; } sigs[] = {
		{ "TERM", SIGTERM }, { "KILL", SIGKILL }, { "INT", SIGINT }, { "HUP", SIGHUP }, { "QUIT", SIGQUIT },
		{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "STOP", SIGSTOP }, { "CONT", SIGCONT },
	};
	if (!strncmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (!strcmp(s, sigs[i].n))
			return sigs[i].s;
	char *end;
	long n = strtol(s, &end, 10);
	return *s && !*end && n > 0 && n < NSIG ? (int) n : -1;
}

/* A handle of the sandbox's process ID (the monitor's). */
static nsbox_process *by_id(nsbox_sandbox *sb, const char *id)
{
	nsbox_process *p = NULL;
	nsbox_error *e = NULL;
	if (nsbox_process_attach(sb, id, &p, &e) < 0) {
		print_error(e);
		nsbox_error_free(e);
		return NULL;
	}
	return p;
}

int cmd_process(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_SETUP : 0;
	}
	const char *sub = argv[1];
	bool json = false, err_stream = false;
	const char *timeout = NULL, *pos[3] = { NULL, NULL, NULL };
	int npos = 0;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--stderr"))
			err_stream = true;
		else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
			timeout = argv[++i];
		else if (npos < 3 && argv[i][0] != '-')
			pos[npos++] = argv[i];
		else {
			print_msg("process: unexpected '%s'\n%s", argv[i], usage);
			return EXIT_SETUP;
		}
	}
	bool ls = !strcmp(sub, "ls");
	if ((!ls && strcmp(sub, "logs") && strcmp(sub, "kill") && strcmp(sub, "wait")) || npos < (ls ? 1 : 2) ||
	    npos > (!strcmp(sub, "kill") ? 3 : ls ? 1 : 2)) {
		fputs(usage, stderr);
		return EXIT_SETUP;
	}
	uint64_t tmo = 0;
	if (live_cli_ms("--timeout", timeout, &tmo) < 0)
		return EXIT_SETUP;
	nsbox_sandbox *sb = live_cli_connect(pos[0]);
	if (!sb)
		return EXIT_SETUP;
	int rc = 0;
	nsbox_error *e = NULL;
	if (ls) {
		char *list = NULL;
		if (nsbox_process_list(sb, &list, &e) < 0) {
			print_error(e);
			rc = EXIT_SETUP;
		} else if (json) {
			printf("%s\n", list);
		} else {
			json_t *a = json_loads(list, 0, NULL);
			printf("%-18s %-8s %12s %12s\n", "ID", "STATE", "STDOUT", "STDERR");
			for (size_t i = 0; i < json_array_size(a); i++) {
				json_t *p = json_array_get(a, i);
				printf("%-18s %-8s %12lld %12lld\n", json_string_value(json_object_get(p, "id")),
				       json_is_true(json_object_get(p, "running")) ? "running" : "ended",
				       (long long) json_integer_value(json_object_get(p, "stdout_bytes")),
				       (long long) json_integer_value(json_object_get(p, "stderr_bytes")));
			}
			json_decref(a);
		}
		free(list);
		nsbox_error_free(e);
		nsbox_sandbox_free(sb);
		return rc;
	}
	nsbox_process *p = by_id(sb, pos[1]);
	if (!p) {
		nsbox_sandbox_free(sb);
		return EXIT_SETUP;
	}
	if (!strcmp(sub, "logs")) {
		char *text = NULL;
		size_t len = 0;
		if (nsbox_process_logs(p, err_stream ? 2 : 1, &text, &len, NULL, &e) < 0) {
			print_error(e);
			rc = EXIT_SETUP;
		} else if (fwrite(text, 1, len, stdout) != len) {
			rc = EXIT_SETUP;
		}
		free(text);
	} else if (!strcmp(sub, "kill")) {
		int sig = pos[2] ? sig_of(pos[2]) : SIGTERM;
		int r = sig < 0 ? -EINVAL : nsbox_process_kill(p, sig);
		if (r < 0) {
			print_msg("process kill: %s %s", pos[1],
			          sig < 0 ? "takes a signal name or number" : r == -ESRCH ? "has ended" : strerror(-r));
			rc = EXIT_SETUP;
		}
	} else {
		nsbox_result *res = NULL;
		if (nsbox_process_wait(p, tmo, &res, &e) < 0) {
			print_error(e);
			rc = nsbox_error_errno(e) == ETIMEDOUT ? 124 : EXIT_SETUP;
		} else {
			rc = nsbox_result_exit_status(res);
			char *j = NULL;
			if (json && nsbox_result_to_json(res, &j, NULL) == 0)
				printf("%s\n", j);
			free(j);
		}
		nsbox_result_free(res);
	}
	nsbox_error_free(e);
	nsbox_process_free(p);
	nsbox_sandbox_free(sb);
	return rc;
}
