/* The Docker front door's translation of docker run's options into nsbox's
 * policy keys (src/cli/docker/run_opts.c), as a table: argv in, the
 * settings (key=value) and what else was recorded out, or the error; and
 * the Go templates of inspect -f and ps --format. */
#include <check.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "docker/docker.h"
#include "opts.h"
#include "unit.h"

static const struct {
	const char *argv[24];
	const char *expect;   /* "key=value ..." (then "| extras"), or "!part of the message" */
} rows[] = {
	/* The command line, option by option. */
	{ { "--rm", "--memory", "512m", "--cpus", "1.0", "--pids-limit", "50", "--read-only", "--tmpfs", "/tmp:size=100M",
	    "--network", "none", "--security-opt", "no-new-privileges", "--cap-drop", "ALL", "-v",
	    "/tmp/x.py:/workspace/code:ro", "IMAGE", "python", "/workspace/code" },
	  "limits.memory=512m limits.cpus=1.0 limits.pids=50 limits.tmpfs=100M network.mode=none "
	  "filesystem.mounts=/tmp/x.py:/workspace/code:ro | rm image=IMAGE argc=2" },
	/* Values as Docker spells them. */
	{ { "-m", "1g", "--memory-swap", "1g", "img", "true" }, "limits.memory=1g | image=img argc=1" },
	{ { "--memory-swap=0", "img", "true" }, " | image=img argc=1" },
	{ { "--network=bridge", "img", "true" }, "network.mode=user | image=img argc=1" },
	{ { "--net", "host", "img", "true" }, "network.mode=host | image=img argc=1" },
	{ { "--security-opt", "seccomp=/p.json", "--security-opt", "no-new-privileges:true", "img", "true" },
	  "security.seccomp=/p.json | image=img argc=1" },
	{ { "--security-opt", "seccomp:unconfined", "img", "true" }, "security.seccomp=unconfined | image=img argc=1" },
	{ { "-v", "/a:/b", "-v", "./c:/d:rw", "-v", "/e:/f:ro,rw", "img", "true" },
	  "filesystem.mounts=/a:/b filesystem.mounts=./c:/d:rw filesystem.mounts=/e:/f:rw | image=img argc=1" },
	{ { "--mount", "type=bind,source=/s,target=/t,readonly", "--mount", "type=tmpfs,destination=/tmp,tmpfs-size=64m",
	    "img", "true" },
	  "filesystem.mounts=/s:/t:ro limits.tmpfs=64m | image=img argc=1" },
	{ { "--tmpfs", "/tmp", "--tmpfs", "/tmp:rw,exec,nosuid,nodev,mode=1777,size=1g", "img", "true" },
	  "limits.tmpfs=1g | image=img argc=1" },
	{ { "-e", "A=1", "--env", "B", "-w", "/w", "-u", "root", "-h", "box", "img", "true" },
	  "environment.set=A=1 environment.pass=B workdir=/w security.user=0:0 hostname=box | image=img argc=1" },
	{ { "-u", "1001:root", "--user=5", "img", "true" }, "security.user=1001:0 security.user=5 | image=img argc=1" },
	{ { "--ulimit", "nofile=512:512", "--ulimit", "fsize=1048576", "img", "true" },
	  "limits.nofile=512 limits.fsize=1048576 | image=img argc=1" },
	{ { "-dit", "--name", "web", "--stop-timeout", "3", "--stop-signal", "SIGINT", "img", "sh" },
	  " | detach interactive tty name=web stop=3/2 image=img argc=1" },
	{ { "--rm=false", "--init", "--sig-proxy=true", "--pull", "never", "--restart=no", "--ipc", "private", "-q",
	    "--privileged=false", "img", "true" },
	  " | image=img argc=1" },
	{ { "--entrypoint", "python3", "-l", "a=b", "img" }, " | image=img argc=0 entrypoint=python3 labels=1" },
	/* Options after IMAGE are the command's. */
	{ { "img", "sh", "--rm", "-m", "1" }, " | image=img argc=4" },
	/* The NSBOX_* variables come first (the environment's). */
	/* Refused, each with its reason. */
	{ { "--mount", "type=bind,source=/s,target=/t,readonly=maybe", "img", "true" },
	  "!--mount 'type=bind,source=/s,target=/t,readonly=maybe': readonly takes true or false, not 'maybe'" },
	{ { "--mount", "type=tmpfs,target=/tmp,tmpfs-size=8m,tmpfs-mode=1777", "img", "true" },
	  "limits.tmpfs=8m | image=img argc=1" },
	{ { "--mount", "type=bind,source=/s,target=/t,bind-propagation=shared", "img", "true" },
	  "!--mount 'type=bind,source=/s,target=/t,bind-propagation=shared': option 'bind-propagation': nsbox takes type, "
	  "source, target, readonly, tmpfs-size and tmpfs-mode" },
	{ { "--mount", "type=volume,source=v,target=/t", "img", "true" },
	  "!--mount 'type=volume,source=v,target=/t': type 'volume': nsbox mounts type=bind (a host path) and "
	  "type=tmpfs (/tmp); it has no volumes" },
	{ { "--mount", "type=bind,source=/s", "img", "true" }, "!--mount 'type=bind,source=/s': no target" },
	{ { "--mount", "type=tmpfs,source=/s,target=/tmp", "img", "true" },
	  "!--mount 'type=tmpfs,source=/s,target=/tmp': a tmpfs has no source" },
	{ { "--mount", "type=bind,source=rel,target=/t", "img", "true" },
	  "!--mount 'type=bind,source=rel,target=/t': a bind's source must be an absolute host path" },
	{ { "-e", "=v", "img", "true" }, "!--env '=v': expected NAME=VALUE or NAME" },
	{ { "--ulimit", "nofile", "img", "true" }, "!--ulimit 'nofile': expected NAME=SOFT[:HARD]" },
	{ { "--ulimit", "nproc=10", "img", "true" },
	  "!--ulimit 'nproc': nsbox sets nofile and fsize only (processes: --pids-limit)" },
	{ { "--ulimit", "nofile=10:20", "img", "true" },
	  "!--ulimit 'nofile=10:20': nsbox sets the soft and hard limits to one value: give N or N:N" },
	{ { "--security-opt", "no-new-privileges=perhaps", "img", "true" },
	  "!--security-opt 'no-new-privileges=perhaps': expected no-new-privileges[=true]" },
	{ { "--security-opt", "no-new-privileges=false", "img", "true" },
	  "!--security-opt 'no-new-privileges=false': nsbox always sets no_new_privs" },
	{ { "--privileged", "img", "true" }, "!--privileged: refused: a sandbox never has privileges" },
	{ { "--cap-add", "NET_ADMIN", "img", "true" }, "!--cap-add NET_ADMIN: refused: every capability is dropped" },
	{ { "--device", "/dev/kvm", "img", "true" }, "!--device /dev/kvm: refused: nsbox passes no host device" },
	{ { "--pid", "host", "img", "true" }, "!--pid host: refused: the sandbox always has a pid namespace" },
	{ { "--pid=host", "img", "true" }, "!--pid host: refused" },
	/* Ports: Docker's -p spellings as the library's [ADDR:]HOSTPORT:PORT
	 * (no address: the library's loopback; host port 0: any free one). */
	{ { "-p", "8080:80", "img", "true" }, " | image=img argc=1 publish=8080:80 expose=80" },
	{ { "-p", "80", "--publish", ":81", "img", "true" }, " | image=img argc=1 publish=0:80,0:81 expose=80,81" },
	{ { "-p", "127.0.0.1::80/tcp", "img", "true" }, " | image=img argc=1 publish=127.0.0.1:0:80 expose=80" },
	{ { "-p", "0.0.0.0:8080:80", "img", "true" }, " | image=img argc=1 publish=0.0.0.0:8080:80 expose=80" },
	{ { "-p", "[::1]:8080:80", "-p", "::1:8081:81", "img", "true" },
	  " | image=img argc=1 publish=[::1]:8080:80,[::1]:8081:81 expose=80,81" },
	{ { "-p", "8000-8002:9000-9002", "img", "true" },
	  " | image=img argc=1 publish=8000:9000,8001:9001,8002:9002 expose=9000,9001,9002" },
	{ { "-p", "9001-9002", "img", "true" }, " | image=img argc=1 publish=0:9001,0:9002 expose=9001,9002" },
	{ { "--publish=8080:80", "--publish", "8081:80", "img", "true" },
	  " | image=img argc=1 publish=8080:80,8081:80 expose=80" },
	{ { "--expose", "7000", "img", "true" }, " | image=img argc=1 expose=7000" },
	{ { "-P", "--expose", "7000", "img", "true" }, " | image=img argc=1 publish=0:7000 expose=7000 all" },
	{ { "-P", "--expose=7001-7002/tcp", "-p", "8080:7001", "img", "true" },
	  " | image=img argc=1 publish=8080:7001,0:7002 expose=7001,7002 all" },
	{ { "--publish-all=false", "img", "true" }, " | image=img argc=1" },
	{ { "-p", "8080:80/udp", "img", "true" }, "!--publish '8080:80/udp': nsbox forwards TCP only (no udp)" },
	{ { "--expose", "53/sctp", "img", "true" }, "!nsbox forwards TCP only (no sctp)" },
	{ { "-p", "80/xyz", "img", "true" }, "!unknown protocol 'xyz'" },
	{ { "-p", "localhost:8080:80", "img", "true" }, "!expected [IP:][HOSTPORT:]PORT" },
	{ { "-p", "[::1:8080:80", "img", "true" }, "!expected [IP:][HOSTPORT:]PORT" },
	{ { "-p", "8080:0", "img", "true" }, "!the container's port is 1..65535" },
	{ { "-p", "8080:", "img", "true" }, "!the container's port is 1..65535" },
	{ { "-p", "8080:80x", "img", "true" }, "!the container's port is 1..65535" },
	{ { "-p", "70000:80", "img", "true" }, "!the host port is 1..65535" },
	{ { "-p", "8001-8000:80-81", "img", "true" }, "!the host port is 1..65535" },
	{ { "-p", "8000-8010:80", "img", "true" }, "!not on any of a range" },
	{ { "-p", "8000-8001:80-82", "img", "true" }, "!differ in length" },
	{ { "-p", "1-100", "img", "true" }, "!at most 64 ports" },
	{ { "-P", "img", "true" }, "!--publish-all: it publishes the --expose ports, and there are none" },
	{ { "--expose", "abc", "img", "true" }, "!--expose 'abc': expected PORT" },
	{ { "-P", "--expose", "1-65", "img", "true" }, "!--publish: nsbox publishes at most 64 ports" },
	{ { "--ipc", "host", "img", "true" }, "!--ipc 'host': the sandbox always has an IPC namespace" },
	{ { "--userns=host", "img", "true" }, "!--userns host: refused" },
	{ { "--security-opt", "apparmor=unconfined", "img", "true" }, "!no AppArmor" },
	{ { "--security-opt", "no-new-privileges=false", "img", "true" }, "!nsbox always sets no_new_privs" },
	{ { "--memory-swap", "2g", "-m", "1g", "img", "true" }, "!nsbox allows no swap" },
	{ { "--memory-swap", "-1", "img", "true" }, "!--memory-swap -1: nsbox allows no swap" },
	{ { "--memory-swap", "1g", "img", "true" }, "!--memory-swap needs --memory" },
	{ { "--pids-limit", "-1", "img", "true" }, "!nsbox always limits processes" },
	{ { "--pids-limit=0", "img", "true" }, "!nsbox always limits processes" },
	{ { "--read-only=false", "img", "true" }, "!always read-only" },
	{ { "--tmpfs", "/run", "img", "true" }, "!nsbox mounts a tmpfs on /tmp only" },
	{ { "--tmpfs", "/tmp:noexec", "img", "true" }, "!option 'noexec'" },
	{ { "--tmpfs", "/tmp:mode=755", "img", "true" }, "!nsbox's /tmp has mode 1777" },
	{ { "--tmpfs", "/tmp:size=lots", "img", "true" }, "!invalid size 'lots'" },
	{ { "--network", "mynet", "img", "true" }, "!no container networks" },
	{ { "-v", "data:/data", "img", "true" }, "!'data' is a named volume" },
	{ { "-v", "/data", "img", "true" }, "!an anonymous volume" },
	{ { "-v", "/a:/b:z", "img", "true" }, "!option 'z'" },
	{ { "--mount", "type=volume,source=v,target=/t", "img", "true" }, "!it has no volumes" },
	{ { "--mount", "type=bind,source=rel,target=/t", "img", "true" }, "!an absolute host path" },
	{ { "--ulimit", "nproc=10", "img", "true" }, "!nsbox sets nofile and fsize only" },
	{ { "--ulimit", "nofile=10:20", "img", "true" }, "!one value" },
	{ { "--cap-drop", "NOT_A_CAP", "img", "true" }, "!not a capability" },
	{ { "--stop-signal", "SIGUSR1", "img", "true" }, "!--stop-signal 'SIGUSR1'" },
	{ { "-u", "www-data", "img", "true" }, "!give a numeric UID[:GID]" },
	{ { "--restart", "always", "img", "true" }, "!nsbox restarts nothing" },
	{ { "--pull", "always", "img", "true" }, "!docker run does not pull" },
	{ { "--rm=maybe", "img", "true" }, "!invalid boolean 'maybe'" },
	{ { "--tmpfs-size", "1m", "img", "true" }, "!unknown option '--tmpfs-size'" },
	{ { "--memory" }, "!option '--memory' needs a value" },
	{ { "--rm" }, "!no image given" },
	{ { "img" }, "!no command given" },
};

static void describe(const docker_run *d, char *got, size_t len)
{
	size_t n = 0;
	got[0] = '\0';
	for (size_t i = 0; i < d->a.n_settings; i++)
		if (strcmp(d->a.settings[i].key, "image"))
			n += (size_t) snprintf(got + n, len - n, "%s%s=%s", n ? " " : "", d->a.settings[i].key,
			                       d->a.settings[i].value);
	n += (size_t) snprintf(got + n, len - n, " |");
	if (d->rm)
		n += (size_t) snprintf(got + n, len - n, " rm");
	if (d->detach)
		n += (size_t) snprintf(got + n, len - n, " detach");
	if (d->a.interactive)
		n += (size_t) snprintf(got + n, len - n, " interactive");
	if (d->tty)
		n += (size_t) snprintf(got + n, len - n, " tty");
	if (d->a.name)
		n += (size_t) snprintf(got + n, len - n, " name=%s", d->a.name);
	if (d->stop_timeout != 10 || d->stop_signal != SIGTERM)
		n += (size_t) snprintf(got + n, len - n, " stop=%d/%d", d->stop_timeout, d->stop_signal);
	n += (size_t) snprintf(got + n, len - n, " image=%s argc=%d", d->image, d->argc);
	if (d->entrypoint)
		n += (size_t) snprintf(got + n, len - n, " entrypoint=%s", d->entrypoint);
	if (d->n_labels)
		n += (size_t) snprintf(got + n, len - n, " labels=%zu", d->n_labels);
	for (size_t i = 0; i < d->a.n_publish; i++)
		n += (size_t) snprintf(got + n, len - n, "%s%s", i ? "," : " publish=", d->a.publish[i]);
	ck_assert(!d->a.publish || !d->a.publish[d->a.n_publish]);
	for (size_t i = 0; i < d->n_exposed; i++)
		n += (size_t) snprintf(got + n, len - n, "%s%u", i ? "," : " expose=", (unsigned) d->exposed[i]);
	if (d->publish_all)
		n += (size_t) snprintf(got + n, len - n, " all");
}

START_TEST(test_run_rows)
{
	char *argv[26] = { "run" };
	int argc = 1;
	for (int k = 0; k < 24 && rows[_i].argv[k]; k++)
		argv[argc++] = (char *) rows[_i].argv[k];
	argv[argc] = NULL;
	char *env[] = { "HOME=/h", NULL };
	docker_run d;
	char err[512] = "", got[1024];
	int r = docker_run_parse(argc, argv, env, &d, err, sizeof(err));
	const char *want = rows[_i].expect;
	if (want[0] == '!') {
		ck_assert_msg(r < 0, "row %d: parsed, expected an error with '%s'", _i, want + 1);
		ck_assert_msg(strstr(err, want + 1) != NULL, "row %d: error '%s' lacks '%s'", _i, err, want + 1);
	} else {
		ck_assert_msg(r == 0, "row %d: %s", _i, err);
		describe(&d, got, sizeof(got));
		ck_assert_msg(!strcmp(got, want), "row %d: got '%s', expected '%s'", _i, got, want);
	}
	docker_run_free(&d);
}
END_TEST

/* The NSBOX_* variables are settings too, before the options (the
 * precedence of nsbox run). */
START_TEST(test_run_env_first)
{
	char *argv[] = { "run", "-m", "1g", "img", "true", NULL };
	char *env[] = { "NSBOX_MEMORY=2g", "NSBOX_POLICY=untrusted", NULL };
	docker_run d;
	char err[256];
	ck_assert_int_eq(docker_run_parse(5, argv, env, &d, err, sizeof(err)), 0);
	ck_assert_uint_eq(d.a.n_settings, 2);
	ck_assert_str_eq(d.a.settings[0].origin, "NSBOX_MEMORY");
	ck_assert_str_eq(d.a.settings[1].value, "1g");
	ck_assert_str_eq(d.a.policy, "untrusted");
	docker_run_free(&d);
}
END_TEST

/* --env-file: NAME=VALUE and NAME lines, comments and blank lines, values
 * as written. */
START_TEST(test_env_file)
{
	char path[] = "/tmp/nsbox-envfile-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	const char text[] = "# a comment\n\nA=1\n  B=\"quoted\"\r\nC\n";
	ck_assert_int_eq(write(fd, text, sizeof(text) - 1), (ssize_t) sizeof(text) - 1);
	close(fd);
	char *argv[] = { "run", "--env-file", path, "img", "true", NULL };
	char *env[] = { NULL };
	docker_run d;
	char err[256], got[512];
	ck_assert_int_eq(docker_run_parse(5, argv, env, &d, err, sizeof(err)), 0);
	describe(&d, got, sizeof(got));
	ck_assert_str_eq(got, "environment.set=A=1 environment.set=B=\"quoted\" environment.pass=C | image=img argc=1");
	ck_assert_str_eq(d.a.settings[2].origin, "--env-file line 5");
	docker_run_free(&d);
	unlink(path);
	char *missing[] = { "run", "--env-file", path, "img", "true", NULL };
	ck_assert_int_eq(docker_run_parse(5, missing, env, &d, err, sizeof(err)), -1);
	ck_assert(strstr(err, "No such file") != NULL);
	docker_run_free(&d);
}
END_TEST

/* Every refused row has its reason; every shown row is in the help. */
START_TEST(test_table)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	docker_run_help(f);
	fclose(f);
	for (const opt_def *o = docker_run_table(); o->name; o++) {
		char want[64];
		snprintf(want, sizeof(want), "--%s", o->name);
		if (o->help)
			ck_assert_msg(strstr(text, want) != NULL, "docker run --help lacks %s", want);
		else if (strcmp(o->name, "net"))
			ck_assert_msg(docker_refusal(o->name) != NULL, "%s is hidden without a reason", want);
		for (const opt_def *p = o + 1; p->name; p++) {
			ck_assert_msg(strcmp(o->name, p->name), "--%s twice", o->name);
			ck_assert_msg(!o->short_name || o->short_name != p->short_name, "-%c twice", o->short_name);
		}
	}
	free(text);
	ck_assert_int_eq(docker_signal("SIGTERM"), SIGTERM);
	ck_assert_int_eq(docker_signal("KILL"), SIGKILL);
	ck_assert_int_eq(docker_signal("2"), SIGINT);
	ck_assert_int_eq(docker_signal("10"), -1);
	ck_assert_int_eq(docker_signal("SIGUSR1"), -1);
	char buf[64], err[512];
	ck_assert_str_eq(docker_image_name("default", buf, sizeof(buf), err, sizeof(err)), "default");
	ck_assert_str_eq(docker_image_name("default:latest", buf, sizeof(buf), err, sizeof(err)), "default");
	/* A reference is named as nsbox image pull names it. */
	ck_assert_str_eq(docker_image_name("python:3.12", buf, sizeof(buf), err, sizeof(err)), "python-3.12");
	ck_assert_str_eq(docker_image_name("ghcr.io/o/app:1.2", buf, sizeof(buf), err, sizeof(err)), "app-1.2");
	ck_assert_str_eq(docker_image_name("localhost:5000/app", buf, sizeof(buf), err, sizeof(err)), "app");
	ck_assert_str_eq(docker_image_name("MyImage", buf, sizeof(buf), err, sizeof(err)), "MyImage");
	ck_assert_ptr_null(docker_image_name("../x", buf, sizeof(buf), err, sizeof(err)));
	ck_assert(strstr(err, "image '../x' is neither an image of nsbox's store") != NULL);
	ck_assert_ptr_null(docker_image_name("", buf, sizeof(buf), err, sizeof(err)));
}
END_TEST

/* Issue 34, item 3: a Docker spelling never lands on a different nsbox
 * run option. Each docker run option that nsbox run lacks is an unknown
 * option to nsbox run (no prefix match: --tmpfs is not --tmpfs-size,
 * --net not --network); each run table's names are unique. */
START_TEST(test_no_prefix_landing)
{
	const opt_def *run = run_option_table();
	for (const opt_def *o = docker_run_table(); o->name; o++) {
		if (opt_find_long(run, o->name, strlen(o->name)))
			continue;
		char opt[64];
		snprintf(opt, sizeof(opt), "--%s", o->name);
		char *argv[] = { "run", opt, "x", "true", NULL };
		char *env[] = { NULL };
		run_args a;
		char err[256] = "", want[96];
		snprintf(want, sizeof(want), "unknown option '%s'", opt);
		ck_assert_int_eq(parse_run_args(4, argv, env, &a, err, sizeof(err)), -1);
		ck_assert_msg(!strcmp(err, want), "nsbox run %s: '%s'", opt, err);
		run_args_free(&a);
	}
	for (const opt_def *o = run; o->name; o++)
		for (const opt_def *p = o + 1; p->name; p++) {
			ck_assert_msg(strcmp(o->name, p->name), "nsbox run: --%s twice", o->name);
			ck_assert_msg(!o->short_name || o->short_name != p->short_name, "nsbox run: -%c twice", o->short_name);
		}
}
END_TEST

static const struct {
	const char *tmpl, *expect;
} templates[] = {
	{ "{{.State.ExitCode}}", "137" },
	{ "{{ .State.OOMKilled }} {{.State.Status}}", "true exited" },
	{ "x{{.Name}}y", "x/c1y" },
	{ "{{json .State}}", "{\"ExitCode\":137,\"OOMKilled\":true,\"Status\":\"exited\",\"Ratio\":0.5}" },
	{ "{{.State.Ratio}}", "0.5" },
	{ "{{.Config.Cmd}}", "[\"a\",\"b\"]" },
	{ "{{.Nope}} {{.State.Nope.Deeper}}", "<no value> <no value>" },
	{ "{{json .Nope}}", "null" },
	{ "{{.Null}}", "<nil>" },
	{ "plain", "plain" },
	{ "{{.State.ExitCode | printf}}", "!field lookups only" },
	{ "{{if .State.Running}}", "!field lookups only" },
	{ "{{.State", "!unclosed" },
};

START_TEST(test_template)
{
	json_t *v = json_loads("{\"Name\":\"/c1\",\"State\":{\"ExitCode\":137,\"OOMKilled\":true,\"Status\":\"exited\","
	                       "\"Ratio\":0.5},\"Config\":{\"Cmd\":[\"a\",\"b\"]},\"Null\":null}",
	                       JSON_PRESERVE_ORDER, NULL);
	ck_assert_ptr_nonnull(v);
	char *out = NULL, err[256] = "";
	int r = go_template(templates[_i].tmpl, v, &out, err, sizeof(err));
	const char *want = templates[_i].expect;
	if (want[0] == '!') {
		ck_assert_int_lt(r, 0);
		ck_assert_msg(strstr(err, want + 1) != NULL, "'%s': error '%s'", templates[_i].tmpl, err);
	} else {
		ck_assert_int_eq(r, 0);
		ck_assert_msg(!strcmp(out, want), "'%s': got '%s', expected '%s'", templates[_i].tmpl, out, want);
	}
	free(out);
	json_decref(v);
}
END_TEST

/* docker ps's PORTS column from NetworkSettings.Ports, grouped as Docker
 * groups it (its DisplayablePorts tests, in this form). */
static const struct {
	const char *ports, *expect;
} displays[] = {
	{ "{}", "" },
	{ "{\"9988/tcp\": null}", "9988/tcp" },
	{ "{\"9988/tcp\": [{\"HostIp\": \"4.3.2.1\", \"HostPort\": \"8899\"}]}", "4.3.2.1:8899->9988/tcp" },
	{ "{\"9988/tcp\": [{\"HostIp\": \"4.3.2.1\", \"HostPort\": \"9988\"}]}", "4.3.2.1:9988->9988/tcp" },
	{ "{\"9999/udp\": [{\"HostIp\": \"1.2.3.4\", \"HostPort\": \"9999\"}], "
	  "\"9998/udp\": [{\"HostIp\": \"1.2.3.4\", \"HostPort\": \"9998\"}]}",
	  "1.2.3.4:9998-9999->9998-9999/udp" },
	{ "{\"9999/udp\": null, \"9998/udp\": null}", "9998-9999/udp" },
	{ "{\"6677/tcp\": [{\"HostIp\": \"1.2.3.4\", \"HostPort\": \"7766\"}], \"9988/udp\": null}",
	  "9988/udp, 1.2.3.4:7766->6677/tcp" },
	{ "{\"1024/tcp\": [{\"HostIp\": \"2.1.1.1\", \"HostPort\": \"80\"}, {\"HostIp\": \"1.1.1.1\", \"HostPort\": \"80\"}], "
	  "\"80/udp\": [{\"HostIp\": \"1.1.1.1\", \"HostPort\": \"1024\"}], \"12345/sctp\": null, "
	  "\"80/tcp\": [{\"HostIp\": \"2.1.1.1\", \"HostPort\": \"1024\"}, {\"HostIp\": \"1.1.1.1\", \"HostPort\": \"1024\"}], "
	  "\"1025/tcp\": null, \"81/tcp\": null}",
	  "81/tcp, 1025/tcp, 12345/sctp, 1.1.1.1:1024->80/tcp, 1.1.1.1:1024->80/udp, 2.1.1.1:1024->80/tcp, "
	  "1.1.1.1:80->1024/tcp, 2.1.1.1:80->1024/tcp" },
	{ "{\"80/tcp\": [{\"HostIp\": \"::1\", \"HostPort\": \"8080\"}, {\"HostIp\": \"0.0.0.0\", \"HostPort\": \"8080\"}]}",
	  "0.0.0.0:8080->80/tcp, [::1]:8080->80/tcp" },
	{ "{\"80/tcp\": [{\"HostIp\": \"::\", \"HostPort\": \"80\"}]}", "[::]:80->80/tcp" },
	{ "{\"80/tcp\": [{\"HostIp\": \"\", \"HostPort\": \"8080\"}]}", "80/tcp" },
};

START_TEST(test_ports_display)
{
	json_t *v = json_loads(displays[_i].ports, JSON_PRESERVE_ORDER, NULL);
	ck_assert_ptr_nonnull(v);
	char *got = ports_display(v);
	ck_assert_ptr_nonnull(got);
	ck_assert_msg(!strcmp(got, displays[_i].expect), "%s: got '%s', expected '%s'", displays[_i].ports, got,
	              displays[_i].expect);
	free(got);
	json_decref(v);
}
END_TEST

/* docker port's order: sortorder.NaturalLess. */
START_TEST(test_natural_order)
{
	ck_assert_int_lt(ports_natural_cmp("8000/tcp -> 127.0.0.1:9", "10000/tcp -> 127.0.0.1:9"), 0);
	ck_assert_int_gt(ports_natural_cmp("127.0.0.1:10000", "127.0.0.1:9000"), 0);
	ck_assert_int_lt(ports_natural_cmp("a1", "a01"), 0);
	ck_assert_int_lt(ports_natural_cmp("1", "a"), 0);
	ck_assert_int_lt(ports_natural_cmp("x", "xy"), 0);
	ck_assert_int_eq(ports_natural_cmp("x80", "x80"), 0);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("docker");
	tcase_add_loop_test(tc, test_run_rows, 0, (int) (sizeof(rows) / sizeof(rows[0])));
	tcase_add_test(tc, test_run_env_first);
	tcase_add_test(tc, test_env_file);
	tcase_add_test(tc, test_table);
	tcase_add_test(tc, test_no_prefix_landing);
	tcase_add_loop_test(tc, test_template, 0, (int) (sizeof(templates) / sizeof(templates[0])));
	tcase_add_loop_test(tc, test_ports_display, 0, (int) (sizeof(displays) / sizeof(displays[0])));
	tcase_add_test(tc, test_natural_order);
	return unit_run("docker", tc);
}
