/* Edit distance for "did you mean" suggestions, and bounded string copies. */
#include "core/strutil.h"

#include <stdio.h>
#include <string.h>

int nevo_edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return (int)(la > lb ? la : lb);
    int row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int cost = a[i - 1] == b[j - 1] ? 0 : 1;
            int best = diag + cost;
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *nevo_closest(const char *word, const char *const *candidates, int n) {
    const char *best = NULL;
    int best_d = 1 << 30;
    for (int i = 0; i < n; i++) {
        int d = nevo_edit_distance(word, candidates[i]);
        if (d < best_d) {
            best_d = d;
            best = candidates[i];
        }
    }
    int len = (int)strlen(word);
    int limit = len / 2 > 2 ? len / 2 : 2;
    return best && best_d <= limit ? best : NULL;
}

void nevo_path_dir(const char *path, char *dir, size_t size) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, size, ".");
    else if (slash == path)
        snprintf(dir, size, "/");
    else
        snprintf(dir, size, "%.*s", (int)(slash - path), path);
}

int nevo_strlcpy(char *dst, const char *src, size_t dst_size) {
    size_t n = strlen(src);
    if (n >= dst_size) {
        memcpy(dst, src, dst_size - 1);
        dst[dst_size - 1] = '\0';
        return -1;
    }
    memcpy(dst, src, n + 1);
    return 0;
}

/* Length of the valid UTF-8 sequence at p (1-4), or 0 if p does not start one
 * (a stray continuation byte, an overlong form, a surrogate, beyond U+10FFFF, cut short). */
static int utf8_len(const unsigned char *p) {
    unsigned c = p[0];
    int n;
    unsigned min;
    if (c >= 0xC2 && c <= 0xDF) n = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) n = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) n = 4, min = 0x10000;
    else return 0;
    unsigned cp = c & (0x3Fu >> (n - 1));
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0; /* also stops at the NUL */
        cp = cp << 6 | (p[i] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

char *nevo_escape(char *dst, size_t dst_size, const char *src) {
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)src;
    while (*p) {
        int n = *p >= 0x20 && *p < 0x7F ? 1 : *p >= 0x80 ? utf8_len(p) : 0;
        size_t need = n ? (size_t)n : 4;
        if (o + need >= dst_size) break;
        if (n) {
            memcpy(dst + o, p, (size_t)n);
            o += (size_t)n;
            p += n;
        } else {
            dst[o++] = '\\';
            dst[o++] = 'x';
            dst[o++] = hex[*p >> 4];
            dst[o++] = hex[*p & 15];
            p++;
        }
    }
    dst[o] = '\0';
    return dst;
}
