/* Edit distance for "did you mean" suggestions, and bounded string copies. */
#include "core/strutil.h"

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
