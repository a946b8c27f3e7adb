/* NULL-terminated, growable arrays of owned strings. */
#ifndef NSBOX_STRV_H
#define NSBOX_STRV_H

#include <stdbool.h>
#include <stddef.h>

typedef struct strv {
	char **v;   /* NULL-terminated; NULL when empty */
	size_t n;
	size_t cap;
} strv;

int strv_push(strv *s, const char *value);          /* copies value */
int strv_push_take(strv *s, char *value);           /* takes ownership */
void strv_clear(strv *s);
int strv_copy(strv *dst, const strv *src);
/* Index of the "NAME=..." entry for NAME, or -1. */
long strv_find_env(const strv *s, const char *name, size_t name_len);
/* Set "NAME=VALUE" kv (owned; NULL: -ENOMEM): it replaces the entry for NAME,
 * or is appended. Freed on failure. */
int strv_set_env_take(strv *s, char *kv);
/* Whether the n bytes at s are a variable name: a letter or '_', then
 * letters, digits and '_'. */
bool env_name_ok(const char *s, size_t n);
/* The length of the n bytes at s without their trailing newlines, carriage
 * returns and spaces (a program's message as it is shown in an error). */
size_t text_trim_end(const char *s, size_t n);

#endif
