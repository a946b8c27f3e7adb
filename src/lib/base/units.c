#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nsbox.h"
#include "base/units.h"

/* Parse a non-negative decimal with an optional fraction; returns the end. */
static int parse_decimal(const char *s, double *out, const char **end)
{
	if (!isdigit((unsigned char) *s) && !(*s == '.' && isdigit((unsigned char) s[1])))
		return -EINVAL;
	char *e = NULL;
	errno = 0;
	double v = strtod(s, &e);
	if (errno || e == s || !isfinite(v) || v < 0)
		return -EINVAL;
	/* strtod accepts hex and exponents; we only want plain decimals. */
	for (const char *p = s; p < e; p++)
		if (!isdigit((unsigned char) *p) && *p != '.')
			return -EINVAL;
	*out = v;
	*end = e;
	return 0;
}

int parse_size(const char *s, uint64_t *out)
{
	double v;
	const char *e;
	if (!s || parse_decimal(s, &v, &e) < 0)
		return -EINVAL;
	double mult = 1;
	switch (tolower((unsigned char) *e)) {
	case '\0': break;
	case 'b': mult = 1; e--; break;
	case 'k': mult = 1024.0; break;
	case 'm': mult = 1024.0 * 1024; break;
	case 'g': mult = 1024.0 * 1024 * 1024; break;
	case 't': mult = 1024.0 * 1024 * 1024 * 1024; break;
	default: return -EINVAL;
	}
	if (*e) {
		e++;
		if (tolower((unsigned char) *e) == 'b' && mult > 1)
			e++;
		else if (*e == 'i' && mult > 1 && tolower((unsigned char) e[1]) == 'b')
			e += 2;
	}
	if (*e)
		return -EINVAL;
	double bytes = v * mult;
	if (bytes >= 18446744073709551615.0)
		return -ERANGE;
	/* Non-negative and below 2^64: the cast is floor (no libm). */
	if (bytes != (double) (uint64_t) bytes && mult == 1)
		return -EINVAL;
	*out = (uint64_t) bytes;
	return 0;
}

int parse_duration_ms(const char *s, uint64_t *out)
{
	double v;
	const char *e;
	if (!s || parse_decimal(s, &v, &e) < 0)
		return -EINVAL;
	double mult;
	if (!*e || strcmp(e, "s") == 0)
		mult = 1000;
	else if (strcmp(e, "ms") == 0)
		mult = 1;
	else if (strcmp(e, "m") == 0)
		mult = 60000;
	else if (strcmp(e, "h") == 0)
		mult = 3600000;
	else if (strcmp(e, "d") == 0)
		mult = 86400000;
	else
		return -EINVAL;
	double ms = v * mult;
	if (ms > 1e15)
		return -ERANGE;
	/* Rounded half up, as llround does for non-negative values (no libm:
	 * one library less to load at every launch); ms - n is exact. */
	uint64_t n = (uint64_t) ms;
	*out = n + (ms - (double) n >= 0.5);
	return 0;
}

int parse_cpus(const char *s, double *out)
{
	double v;
	const char *e;
	if (!s || parse_decimal(s, &v, &e) < 0 || *e)
		return -EINVAL;
	if (v <= 0 || v > 1024)
		return -ERANGE;
	*out = v;
	return 0;
}

int parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	if (!s || !isdigit((unsigned char) *s))
		return -EINVAL;
	char *e = NULL;
	errno = 0;
	unsigned long long v = strtoull(s, &e, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (errno || *e)
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int parse_bool(const char *s, bool *out)
{
	if (!s)
		return -EINVAL;
	if (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on") || !strcmp(s, "1")) {
		*out = true;
		return 0;
	}
	if (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off") || !strcmp(s, "0")) {
		*out = false;
		return 0;
	}
	return -EINVAL;
}

void format_size(uint64_t v, char *buf, size_t len)
{
	static const char suffix[] = "kmgt";
	int i = -1;
	while (v && v % 1024 == 0 && i < 3) {
		v /= 1024;
		i++;
	}
	if (i < 0)
		snprintf(buf, len, "%llu", (unsigned long long) v);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long) v, suffix[i]);
}

void format_duration_ms(uint64_t ms, char *buf, size_t len)
{
	if (ms % 3600000 == 0 && ms)
		snprintf(buf, len, "%lluh", (unsigned long long) (ms / 3600000));
	else if (ms % 60000 == 0 && ms)
		snprintf(buf, len, "%llum", (unsigned long long) (ms / 60000));
	else if (ms % 1000 == 0)
		snprintf(buf, len, "%llus", (unsigned long long) (ms / 1000));
	else
		snprintf(buf, len, "%llums", (unsigned long long) ms);
}

int nsbox_parse_duration_ms(const char *s, uint64_t *ms)
{
	return ms ? parse_duration_ms(s, ms) : -EINVAL;
}

int nsbox_parse_size(const char *s, uint64_t *bytes)
{
	return bytes ? parse_size(s, bytes) : -EINVAL;
}
