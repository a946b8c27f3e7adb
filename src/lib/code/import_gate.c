/* The Python import gate: which modules a snippet imports, found by Python's
 * own ast module running INSIDE a first, short sandbox (same image, no
 * network, strict seccomp, small limits), so that the untrusted text never
 * meets a parser on the host. The host only reads back "IMPORT name" lines,
 * checks each name's spelling, and decides. Defence in depth, not a
 * boundary: code can still import what it wants through means no static
 * reading sees (exec of a built string, a getattr chain); the sandbox is
 * the boundary. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "config/conf.h"
#include "base/json.h"
#include "base/error.h"
#include "sandbox/sandbox.h"
#include "base/strv.h"

#define GATE_CHECKER "/tmp/nsbox-gate.py"
#define GATE_CODE    "/tmp/nsbox-gate-code.py"
#define GATE_NAME_MAX 200
#define GATE_NAMES_MAX 4096

/* ast.walk is iterative, so deep nesting costs the parser (which raises
 * RecursionError, MemoryError or SyntaxError, all caught) and not the walk.
 * Any failure prints ERROR and exits 3: the host then fails closed. */
static const char checker[] =
	"import ast, sys\n"
	"def main():\n"
	"    tree = ast.parse(open('" GATE_CODE "', 'rb').read(), '<code>')\n"
	"    out = set()\n"
	"    for n in ast.walk(tree):\n"
	"        if isinstance(n, ast.Import):\n"
	"            out.update(a.name for a in n.names)\n"
	"        elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:\n"
	"            out.add(n.module)\n"
	"            out.update(n.module + '.' + a.name for a in n.names if a.name != '*')\n"
	"        elif isinstance(n, ast.Call) and n.args:\n"
	"            f = n.func\n"
	"            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None\n"
	"            a = n.args[0]\n"
	"            if name in ('__import__', 'import_module') and isinstance(a, ast.Constant) \\\n"
	"                    and isinstance(a.value, str):\n"
	"                out.add(a.value)\n"
	"    for m in sorted(out):\n"
	"        print('IMPORT', m)\n"
	"    print('OK')\n"
	"try:\n"
	"    main()\n"
	"except BaseException as e:\n"
	"    print('ERROR', type(e).__name__)\n"
	"    sys.stdout.flush()\n"
	"    import os\n"
	"    os._exit(3)\n";

static int checker_config(const nsbox_config *cfg, nsbox_config **out, const char *code, size_t len,
                          nsbox_error **err)
{
	nsbox_config *c = NULL;
	int r = nsbox_config_new(&c, err);
	static const char *const fixed[][2] = {
		{ "limits.memory", "256m" }, { "limits.pids", "16" }, { "limits.timeout", "20s" },
		{ "limits.output", "1m" }, { "limits.nofile", "64" }, { "network.mode", "none" },
		{ "security.seccomp", "strict" }, { "workdir", "/tmp" },
		{ "environment.set", "PYTHONDONTWRITEBYTECODE=1" },
	};
	for (size_t i = 0; r == 0 && i < sizeof(fixed) / sizeof(fixed[0]); i++)
		r = nsbox_config_set(c, fixed[i][0], fixed[i][1], "import gate", err);
	if (r == 0 && cfg->rootfs)
		r = nsbox_config_set(c, "rootfs", cfg->rootfs, "import gate", err);
	else if (r == 0 && cfg->image)
		r = nsbox_config_set(c, "image", cfg->image, "import gate", err);
	if (r == 0 && cfg->cgroup_parent)
		r = nsbox_config_set(c, "limits.cgroup_parent", cfg->cgroup_parent, "import gate", err);
	if (r == 0)
		r = nsbox_config_set(c, "limits.fallback", config_fallbacks[cfg->fallback], "import gate", err);
	if (r == 0) {
		/* The code may need more room than the default /tmp. */
		char tmpfs[32];
		snprintf(tmpfs, sizeof(tmpfs), "%zu", len + (16u << 20));
		r = nsbox_config_set(c, "limits.tmpfs", tmpfs, "import gate", err);
	}
	const char *argv[] = { "python3", "-I", "-S", GATE_CHECKER };
	if (r == 0)
		r = nsbox_config_set_command(c, 4, argv, err);
	if (r == 0)
		r = nsbox_config_add_file(c, GATE_CHECKER, checker, sizeof(checker) - 1, 0644, err);
	if (r == 0)
		r = nsbox_config_add_file(c, GATE_CODE, code, len, 0644, err);
	if (r < 0) {
		nsbox_config_free(c);
		return r;
	}
	*out = c;
	return 0;
}

static bool name_ok(const char *s, size_t n)
{
	if (!n || n > GATE_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.", s[i]) || !s[i])
			return false;
	return true;
}

/* The checker's output is read as hostile: exact lines, checked names, and
 * the final OK, or the whole scan fails. */
static int parse_output(const char *out, size_t len, strv *names, nsbox_error **err)
{
	const char *p = out, *end = out + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t) (end - p));
		if (!nl)
			break;
		size_t n = (size_t) (nl - p);
		if (n == 2 && !memcmp(p, "OK", 2) && nl + 1 == end)
			return 0;
		if (n > 7 && !memcmp(p, "IMPORT ", 7) && name_ok(p + 7, n - 7) && names->n < GATE_NAMES_MAX) {
			char *s = strndup(p + 7, n - 7);
			if (!s || strv_push_take(names, s) < 0)
				return nsbox_err(err, ENOMEM, "import_gate", "read the import checker's output");
		} else {
			break;
		}
		p = nl + 1;
	}
	return nsbox_err(err, -EPROTO, "import_gate", "import gate: unexpected output from the checker");
}

int nsbox_import_gate_scan(const nsbox_config *cfg, const char *code, size_t len, char ***imports,
                           size_t *count, nsbox_error **err)
{
	if (!cfg || (!code && len) || !imports || !count)
		return nsbox_err(err, EINVAL, "import_gate", "scan imports: missing argument");
	nsbox_config *c = NULL;
	int r = checker_config(cfg, &c, code ? code : "", len, err);
	if (r < 0)
		return nsbox_err_prefix(err, r, "import gate");
	nsbox_spawn_options o = {
		.version = NSBOX_SPAWN_OPTIONS_VERSION, .flags = NSBOX_SPAWN_CAPTURE, .config = c,
		.stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1, .signal_fd = -1, .stats_fd = -1,
	};
	nsbox_sandbox *sb = NULL;
	nsbox_result *res = NULL;
	r = nsbox_spawn(&o, &sb, err);
	if (r == 0) {
		r = nsbox_sandbox_wait(sb, &res, err);
		nsbox_sandbox_free(sb);
	}
	nsbox_config_free(c);
	if (r < 0)
		return nsbox_err_prefix(err, r, "import gate: run the checker");
	strv names = { 0 };
	size_t olen = 0;
	const char *out = nsbox_result_output(res, 1, &olen);
	if (res->status != NSBOX_STATUS_EXITED || res->exit_code != 0) {
		/* ERROR <exception class> is the checker's own report. */
		char why[80] = "";
		if (out && olen > 6 && !memcmp(out, "ERROR ", 6) && name_ok(out + 6, strcspn(out + 6, "\n")) &&
		    strcspn(out + 6, "\n") < 60)
			snprintf(why, sizeof(why), ": %.*s", (int) strcspn(out + 6, "\n"), out + 6);
		r = nsbox_err(err, -EPROTO, "import_gate",
		              "import gate: the checker could not read the code (%s%s%s)",
		              nsbox_status_name(res->status), res->error ? ": " : why,
		              res->error ? res->error->message : "");
	} else if (res->out_truncated[0]) {
		r = nsbox_err(err, -EPROTO, "import_gate", "import gate: the checker's output was too long");
	} else {
		r = parse_output(out ? out : "", olen, &names, err);
	}
	nsbox_result_free(res);
	if (r < 0) {
		strv_clear(&names);
		return r;
	}
	*count = names.n;
	*imports = names.v;
	return 0;
}

bool nsbox_import_gate_matches(const char *module, const char *blocked)
{
	size_t n = strlen(blocked);
	return module && n && !strncmp(module, blocked, n) && (module[n] == '\0' || module[n] == '.');
}

int nsbox_result_set_imports(nsbox_result *r, const char *mode, const char *const *blocked, size_t n,
                             nsbox_error **err)
{
	if (!r || !mode || (n && !blocked))
		return nsbox_err(err, EINVAL, "import_gate", "record imports: missing argument");
	buf b = { 0 };
	buf_puts(&b, "{\"import_gate\":");
	json_cstr(&b, mode);
	buf_puts(&b, ",\"blocked_imports\":[");
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_puts(&b, ",");
		json_cstr(&b, blocked[i]);
	}
	buf_puts(&b, "]}");
	char *s = buf_steal(&b);
	if (!s)
		return nsbox_err(err, ENOMEM, "import_gate", "record imports");
	free(r->code_json);
	r->code_json = s;
	return 0;
}

int nsbox_import_gate_check(const nsbox_config *cfg, const char *code, size_t len, const char *const *blocked,
                            size_t n_blocked, char ***hits, size_t *n_hits, nsbox_error **err)
{
	if (!hits || !n_hits || (n_blocked && !blocked))
		return nsbox_err(err, EINVAL, "import_gate", "check imports: missing argument");
	*hits = NULL;
	*n_hits = 0;
	char **imports = NULL;
	size_t n = 0;
	int r = nsbox_import_gate_scan(cfg, code, len, &imports, &n, err);
	if (r < 0)
		return r;
	strv found = { 0 };
	for (size_t i = 0; r == 0 && i < n; i++)
		for (size_t k = 0; k < n_blocked; k++)
			if (nsbox_import_gate_matches(imports[i], blocked[k])) {
				r = strv_push(&found, imports[i]);
				break;
			}
	for (size_t i = 0; i < n; i++)
		free(imports[i]);
	free(imports);
	if (r < 0) {
		strv_clear(&found);
		return nsbox_err(err, ENOMEM, "import_gate", "check imports");
	}
	if (!found.n)
		return 0;
	buf names = { 0 };
	for (size_t i = 0; i < found.n; i++) {
		if (i)
			buf_puts(&names, ", ");
		buf_puts(&names, found.v[i]);
	}
	/* The message the issue fixes: "Security policy blocked import: os". */
	(void) nsbox_err(err, -EACCES, "import_gate", "Security policy blocked import: %s", names.data ? names.data : "?");
	buf_free(&names);
	*hits = found.v;
	*n_hits = found.n;
	return -EACCES;
}
