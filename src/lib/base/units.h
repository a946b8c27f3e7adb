/* Parsing and printing of the value types used in options and policies. */
#ifndef NSBOX_UNITS_H
#define NSBOX_UNITS_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

/* "512m", "1g", "100k", "1.5g", "4096" (bytes). Suffixes are binary (k=1024)
 * and case-insensitive, with an optional trailing 'b' ("512mb"). */
int parse_size(const char *s, uint64_t *out);
/* "30" (seconds), "30s", "2m", "1h", "250ms", "1.5s". */
int parse_duration_ms(const char *s, uint64_t *out);
/* A decimal number of cores, > 0 and <= 1024, e.g. "0.5", "2". */
int parse_cpus(const char *s, double *out);
/* A decimal integer in [min, max]. */
int parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out);
int parse_bool(const char *s, bool *out);

/* Shortest exact rendering: 536870912 -> "512m". */
void format_size(uint64_t v, char *buf, size_t len);
/* 60000 -> "60s", 1500 -> "1500ms", 120000 -> "2m". */
void format_duration_ms(uint64_t ms, char *buf, size_t len);

#endif
