#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/strv.h"

int strv_push_take(strv *s, char *value)
{
	if (!value)
		return -ENOMEM;
	if (s->n + 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8;
		char **v = realloc(s->v, cap * sizeof(*v));
		if (!v) {
			free(value);
			return -ENOMEM;
		}
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = value;
	s->v[s->n] = NULL;
	return 0;
}

int strv_push(strv *s, const char *value)
{
	return strv_push_take(s, strdup(value));
}

void strv_clear(strv *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	s->v = NULL;
	s->n = s->cap = 0;
}

int strv_copy(strv *dst, const strv *src)
{
	strv_clear(dst);
	for (size_t i = 0; i < src->n; i++) {
		int r = strv_push(dst, src->v[i]);
		if (r < 0)
			return r;
	}
	return 0;
}

long strv_find_env(const strv *s, const char *name, size_t name_len)
{
	for (size_t i = 0; i < s->n; i++)
		if (strncmp(s->v[i], name, name_len) == 0 && s->v[i][name_len] == '=')
			return (long) i;
	return -1;
}

int strv_set_env_take(strv *s, char *kv)
{
	if (!kv)
		return -ENOMEM;
	long at = strv_find_env(s, kv, strcspn(kv, "="));
	if (at < 0)
		return strv_push_take(s, kv);
	free(s->v[at]);
	s->v[at] = kv;
	return 0;
}

bool env_name_ok(const char *s, size_t n)
{
	if (n == 0 || !(isalpha((unsigned char) s[0]) || s[0] == '_'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!(isalnum((unsigned char) s[i]) || s[i] == '_'))
			return false;
	return true;
}

size_t text_trim_end(const char *s, size_t n)
{
	while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
		n--;
	return n;
}
