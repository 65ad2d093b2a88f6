/* Small string helpers used across modules (internal). */
#ifndef NEVO_STRUTIL_H
#define NEVO_STRUTIL_H

#include <stddef.h>

/* Edit distance between a and b (Levenshtein, case-sensitive). */
int nevo_edit_distance(const char *a, const char *b);

/* The candidate closest to word by edit distance, or NULL when none is plausibly a
 * typo of it (distance above max(2, len/2)). */
const char *nevo_closest(const char *word, const char *const *candidates, int n);

/* Copies src into dst of size dst_size, always NUL-terminated; returns 0 if it fit. */
int nevo_strlcpy(char *dst, const char *src, size_t dst_size);

/* The directory of path into dir: "." for a bare name, "/" for a file at the root. */
void nevo_path_dir(const char *path, char *dir, size_t size);

/* Copies src into dst (size dst_size >= 1, always NUL-terminated) printable on one
 * line: control bytes (0x00-0x1F, 0x7F) and bytes that are not part of valid UTF-8
 * become \xNN; valid UTF-8 is kept. Truncates at a whole character or escape. Returns
 * dst. Every error message goes through it (nevo_error), so a name echoed from the
 * user (a key, an env name, a path) never splits a message over lines. */
char *nevo_escape(char *dst, size_t dst_size, const char *src);

#endif
