/* The Go templates scripts give docker inspect -f and docker ps --format,
 * as far as they are field lookups: {{.State.ExitCode}}, {{json .Config}},
 * {{.}}, with text around them. Anything else (pipelines, functions,
 * conditionals) is refused by name rather than printed wrong. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "docker/docker.h"

static int grow(char **out, size_t *len, const char *s, size_t n)
{
	char *p = realloc(*out, *len + n + 1);
	if (!p)
		return -1;
	memcpy(p + *len, s, n);
	*len += n;
	p[*len] = '\0';
	*out = p;
	return 0;
}

/* ".A.B" under v; NULL when a field is missing (*missing set). */
static json_t *lookup(json_t *v, const char *path, size_t n, bool *missing)
{
	*missing = false;
	if (n == 1)
		return v;   /* "." */
	const char *p = path + 1, *end = path + n;
	while (p < end) {
		const char *dot = memchr(p, '.', (size_t) (end - p));
		size_t fl = (size_t) ((dot ? dot : end) - p);
		char field[128];
		if (!fl || fl >= sizeof(field) || !json_is_object(v)) {
			*missing = true;
			return NULL;
		}
		memcpy(field, p, fl);
		field[fl] = '\0';
		v = json_object_get(v, field);
		if (!v) {
			*missing = true;
			return NULL;
		}
		p = dot ? dot + 1 : end;
	}
	return v;
}

static char *render(json_t *v, bool missing, bool as_json)
{
	char *s = NULL;
	if (missing)
		return strdup(as_json ? "null" : "<no value>");
	if (as_json || json_is_object(v) || json_is_array(v))
		return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (json_is_string(v))
		return strdup(json_string_value(v));
	if (json_is_integer(v))
		return asprintf(&s, "%lld", (long long) json_integer_value(v)) < 0 ? NULL : s;
	if (json_is_real(v))
		return asprintf(&s, "%g", json_real_value(v)) < 0 ? NULL : s;
	if (json_is_boolean(v))
		return strdup(json_is_true(v) ? "true" : "false");
	return strdup("<nil>");
}

int go_template(const char *tmpl, json_t *v, char **out, char *err, size_t errlen)
{
	size_t len = *out ? strlen(*out) : 0;
	const char *p = tmpl;
	for (;;) {
		const char *open = strstr(p, "{{");
		if (grow(out, &len, p, open ? (size_t) (open - p) : strlen(p)) < 0)
			return -1;
		if (!open)
			return 0;
		const char *close = strstr(open + 2, "}}");
		if (!close) {
			snprintf(err, errlen, "unclosed '{{' in the template");
			return -1;
		}
		const char *a = open + 2, *b = close;
		while (a < b && *a == ' ')
			a++;
		while (b > a && b[-1] == ' ')
			b--;
		bool as_json = false;
		if ((size_t) (b - a) > 5 && !strncmp(a, "json ", 5)) {
			as_json = true;
			a += 5;
			while (a < b && *a == ' ')
				a++;
		}
		if (a == b || *a != '.' || memchr(a, ' ', (size_t) (b - a)) || memchr(a, '|', (size_t) (b - a))) {
			snprintf(err, errlen, "template action '{{%.*s}}': nsbox takes field lookups only ({{.State.ExitCode}}, "
			         "{{json .Config}})", (int) (close - open - 2), open + 2);
			return -1;
		}
		bool missing;
		json_t *f = lookup(v, a, (size_t) (b - a), &missing);
		char *s = render(f, missing, as_json);
		int r = s ? grow(out, &len, s, strlen(s)) : -1;
		free(s);
		if (r < 0)
			return -1;
		p = close + 2;
	}
}
