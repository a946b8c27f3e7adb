/* The Dockerfile subset nsbox builds: FROM (one nsbox image), RUN, COPY,
 * ENV, WORKDIR and USER, with Docker's comments, line continuations and
 * exec (JSON) forms. Everything else is refused with its line, never
 * skipped: a build that silently did less than its file says would be a
 * different image. No variable substitution: a '$' in ENV, COPY, WORKDIR or
 * USER is refused (RUN's shell expands its own). */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "image/build.h"

typedef struct df {
	nsbox_image_spec *spec;
	const char *origin;
	size_t line;        /* where the instruction starts */
	bool have_from;
	nsbox_error **err;
} df;

#define df_err(d, ...) nsbox_err_at((d)->err, "image", (d)->origin, (d)->line, 1, __VA_ARGS__)

/* One UTF-8 sequence for code point c into b. */
static void put_utf8(buf *b, unsigned c)
{
	char o[4];
	size_t n;
	if (c < 0x80) {
		o[0] = (char) c, n = 1;
	} else if (c < 0x800) {
		o[0] = (char) (0xc0 | c >> 6), o[1] = (char) (0x80 | (c & 0x3f)), n = 2;
	} else if (c < 0x10000) {
		o[0] = (char) (0xe0 | c >> 12), o[1] = (char) (0x80 | ((c >> 6) & 0x3f));
		o[2] = (char) (0x80 | (c & 0x3f)), n = 3;
	} else {
		o[0] = (char) (0xf0 | c >> 18), o[1] = (char) (0x80 | ((c >> 12) & 0x3f));
		o[2] = (char) (0x80 | ((c >> 6) & 0x3f)), o[3] = (char) (0x80 | (c & 0x3f)), n = 4;
	}
	buf_append(b, o, n);
}

static bool hex4(const char *p, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		if (!isxdigit((unsigned char) p[i]))
			return false;
		v = v * 16 + (unsigned) (isdigit((unsigned char) p[i]) ? p[i] - '0' : (tolower((unsigned char) p[i]) - 'a' + 10));
	}
	*out = v;
	return true;
}

/* A JSON string at *p (at its quote) into out; false when malformed. */
static bool json_string(const char **pp, strv *out)
{
	const char *p = *pp + 1;
	buf b = { 0 };
	buf_puts(&b, "");
	while (*p && *p != '"') {
		if ((unsigned char) *p < 0x20)
			goto bad;
		if (*p != '\\') {
			buf_append(&b, p++, 1);
			continue;
		}
		p++;
		const char *simple = strchr("\"\\/bfnrt", *p);
		if (*p && simple) {
			static const char to[] = "\"\\/\b\f\n\r\t";
			buf_append(&b, &to[simple - "\"\\/bfnrt"], 1);
			p++;
			continue;
		}
		unsigned c, lo;
		if (*p != 'u' || !hex4(p + 1, &c))
			goto bad;
		p += 5;
		if (c >= 0xd800 && c < 0xdc00) {
			if (p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, &lo) || lo < 0xdc00 || lo >= 0xe000)
				goto bad;
			c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
			p += 6;
		} else if (c >= 0xdc00 && c < 0xe000) {
			goto bad;
		}
		if (c == 0)
			goto bad;   /* no NUL inside an argument */
		put_utf8(&b, c);
	}
	if (*p != '"')
		goto bad;
	*pp = p + 1;
	char *s = buf_steal(&b);
	return s && strv_push_take(out, s) == 0;
bad:
	buf_free(&b);
	return false;
}

/* The exec form: a JSON array of strings and nothing after it. */
static bool json_array(const char *p, strv *out)
{
	p += strspn(p, " \t");
	if (*p++ != '[')
		return false;
	p += strspn(p, " \t");
	if (*p == ']')
		return p[1 + strspn(p + 1, " \t")] == '\0';
	for (;;) {
		if (*p != '"' || !json_string(&p, out))
			return false;
		p += strspn(p, " \t");
		if (*p == ']')
			break;
		if (*p++ != ',')
			return false;
		p += strspn(p, " \t");
	}
	p++;
	return p[strspn(p, " \t")] == '\0';
}

static int add(df *d, enum build_kind kind, strv *a)
{
	char where[4200];
	snprintf(where, sizeof(where), "%.4000s:%zu", d->origin, d->line);
	int r = spec_add(d->spec, kind, a, where, d->err);
	strv_clear(a);
	return r;
}

static int words(const char *rest, strv *a)
{
	for (const char *p = rest; *p;) {
		p += strspn(p, " \t");
		size_t n = strcspn(p, " \t");
		if (!n)
			break;
		char *w = strndup(p, n);
		if (!w || strv_push_take(a, w) < 0)
			return -ENOMEM;
		p += n;
	}
	return 0;
}

static int no_dollar(df *d, const char *instr, const char *rest);

/* ENV NAME=VALUE... with shell-like quotes ("..." with \ escapes, '...'
 * literal, \x outside quotes); or the old ENV NAME VALUE. */
static int env_pairs(df *d, const char *rest, strv *a)
{
	const char *sp = rest + strcspn(rest, " \t=");
	if (*sp != '=') {
		const char *v = sp + strspn(sp, " \t");
		char *kv = NULL;
		if (!*v)
			return df_err(d, "ENV %s: no value", rest);
		if (strchr(v, '$'))
			return no_dollar(d, "ENV", rest);
		if (asprintf(&kv, "%.*s=%s", (int) (sp - rest), rest, v) < 0 || strv_push_take(a, kv) < 0)
			return -ENOMEM;
		return 0;
	}
	for (const char *p = rest; *p;) {
		p += strspn(p, " \t");
		if (!*p)
			break;
		buf b = { 0 };
		buf_puts(&b, "");
		char q = 0;
		for (; *p && (q || (*p != ' ' && *p != '\t')); p++) {
			if (!q && (*p == '"' || *p == '\'')) {
				q = *p;
			} else if (q && *p == q) {
				q = 0;
			} else if (*p == '\\' && q != '\'' && p[1]) {
				buf_append(&b, ++p, 1);
			} else if (*p == '$' && q != '\'') {
				buf_free(&b);
				return no_dollar(d, "ENV", rest);
			} else {
				buf_append(&b, p, 1);
			}
		}
		char *kv = buf_steal(&b);
		if (q) {
			free(kv);
			return df_err(d, "ENV: an unterminated quote");
		}
		if (!kv || strv_push_take(a, kv) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int no_dollar(df *d, const char *instr, const char *rest)
{
	return strchr(rest, '$') ? df_err(d, "%s: variable substitution ('$') is not supported: %s", instr, rest) : 0;
}

static int instruction(df *d, char *line)
{
	char *rest = line + strcspn(line, " \t");
	size_t wl = (size_t) (rest - line);
	rest += strspn(rest, " \t");
	for (char *e = rest + strlen(rest); e > rest && (e[-1] == ' ' || e[-1] == '\t'); e--)
		e[-1] = '\0';
	char word[16] = "";
	for (size_t i = 0; i < wl && i < sizeof(word) - 1; i++)
		word[i] = (char) toupper((unsigned char) line[i]), word[i + 1] = '\0';
	strv a = { 0 };
	int r = 0;
	if (!strcmp(word, "FROM")) {
		if (d->have_from)
			return df_err(d, "a second FROM: multi-stage builds are not supported");
		if (d->spec->n_steps)
			return df_err(d, "FROM must be the first instruction");
		r = words(rest, &a);
		if (r == 0 && (a.n != 1 || a.v[0][0] == '-')) {
			strv_clear(&a);
			return df_err(d, "FROM: expected one image name (no AS, no --platform): '%s'", rest);
		}
		d->have_from = true;
		char where[4200];
		snprintf(where, sizeof(where), "%.4000s:%zu", d->origin, d->line);
		r = r ?: nsbox_image_spec_set_from(d->spec, a.v[0], d->err) < 0
			? nsbox_err_prefix(d->err, -EINVAL, "%s", where) : 0;
		strv_clear(&a);
		return r;
	}
	static const char *const known[] = { "RUN", "COPY", "ENV", "WORKDIR", "USER" };
	static const char *const refused[] = { "ADD", "CMD", "ENTRYPOINT", "EXPOSE", "LABEL", "ARG", "VOLUME",
	                                       "STOPSIGNAL", "HEALTHCHECK", "SHELL", "ONBUILD", "MAINTAINER" };
	bool is_known = false;
	for (size_t i = 0; i < sizeof(known) / sizeof(*known); i++)
		is_known |= !strcmp(word, known[i]);
	for (size_t i = 0; !is_known && i < sizeof(refused) / sizeof(*refused); i++)
		if (!strcmp(word, refused[i]))
			return df_err(d, "'%s' is not supported by nsbox image builds (FROM, RUN, COPY, ENV, WORKDIR, "
			              "USER)", word);
	if (!is_known)
		return df_err(d, "unknown instruction '%.40s'", line);
	if (!d->have_from)
		return df_err(d, "%s before FROM: the first instruction must be FROM", word);
	if (!*rest)
		return df_err(d, "%s: no arguments", word);
	if (!strcmp(word, "RUN")) {
		if (rest[0] == '-' && rest[1] == '-')
			return df_err(d, "RUN options are not supported: %s", rest);
		/* Not valid JSON: the shell form, as Docker has it. */
		if (rest[0] == '[' && json_array(rest, &a))
			return add(d, BK_EXEC, &a);
		strv_clear(&a);
		return strv_push(&a, rest) < 0 ? -ENOMEM : add(d, BK_RUN, &a);
	}
	if (!strcmp(word, "COPY")) {
		if (rest[0] == '-' && rest[1] == '-')
			return df_err(d, "COPY options (--chown, --from, --chmod, --link) are not supported: %s", rest);
		if (!(rest[0] == '[' && json_array(rest, &a))) {
			strv_clear(&a);
			r = no_dollar(d, word, rest) ?: words(rest, &a);
		}
		return r < 0 ? (strv_clear(&a), r) : add(d, BK_COPY, &a);
	}
	r = strcmp(word, "ENV") ? no_dollar(d, word, rest) : 0;
	if (r == 0 && !strcmp(word, "ENV"))
		r = env_pairs(d, rest, &a);
	else if (r == 0 && !strcmp(word, "WORKDIR"))
		r = strv_push(&a, rest);
	else if (r == 0)
		r = words(rest, &a);
	if (r < 0) {
		strv_clear(&a);
		return r == -ENOMEM ? nsbox_err(d->err, ENOMEM, "image", "read '%s'", d->origin) : r;
	}
	return add(d, !strcmp(word, "ENV") ? BK_ENV : !strcmp(word, "WORKDIR") ? BK_WORKDIR : BK_USER, &a);
}

int spec_parse_dockerfile(nsbox_image_spec *s, const char *origin, const char *text, size_t len, nsbox_error **err)
{
	if (memchr(text, '\0', len))
		return nsbox_err_at(err, "image", origin, 1, 1, "a NUL byte: not a Dockerfile");
	df d = { .spec = s, .origin = origin, .err = err };
	buf logical = { 0 };
	bool cont = false;
	size_t lineno = 0;
	int r = 0;
	for (const char *p = text; r == 0 && p < text + len;) {
		const char *nl = memchr(p, '\n', (size_t) (text + len - p));
		size_t n = nl ? (size_t) (nl - p) : (size_t) (text + len - p);
		lineno++;
		const char *line = p;
		p += n + (nl ? 1 : 0);
		while (n && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
			n--;
		size_t lead = 0;
		while (lead < n && (line[lead] == ' ' || line[lead] == '\t'))
			lead++;
		/* Comments and blank lines, also inside a continuation. */
		if (lead == n || line[lead] == '#')
			continue;
		if (!cont) {
			d.line = lineno;
			logical.len = 0;
			if (logical.data)
				logical.data[0] = '\0';
		}
		cont = line[n - 1] == '\\';
		size_t from = logical.len ? 0 : lead;
		buf_append(&logical, line + from, n - from - (cont ? 1 : 0));
		if (logical.oom)
			r = nsbox_err(err, ENOMEM, "image", "read '%s'", origin);
		else if (!cont && logical.data)
			r = instruction(&d, logical.data);
	}
	if (r == 0 && cont && logical.len)
		r = instruction(&d, logical.data);
	buf_free(&logical);
	if (r == 0 && !d.have_from)
		r = nsbox_err_at(err, "image", origin, lineno ? lineno : 1, 1, "no FROM: the image to build on");
	return r;
}
