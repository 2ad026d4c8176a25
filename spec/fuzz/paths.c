/* spec/fuzz/paths.c — libFuzzer target for the lexical path helpers of
 * src/paths.c: hcp_path_normalize and hcp_path_contains.
 *
 * The input is split at its first newline into A and B. Checked, aborting
 * on any violation (a crash for libFuzzer):
 * - normalize(A) equals an independent reference normalisation and fits in
 *   max(strlen(A) + 1, 2) bytes (the Lua binding allocates strlen + 2);
 *   given any smaller buffer it returns -1 or the same answer, and it is
 *   refused one byte short of its length + 1, never writing past the size
 *   it was given (ASan watches the exact-size heap buffers). It may refuse
 *   a buffer of exactly length + 1 when a prefix it builds on the way is
 *   longer than the result ("/abc/../d"): src/hcp_core.h says so;
 * - normalising twice changes nothing;
 * - contains(J, P) for normalised absolute J = "/"A and P = "/"B is
 *   exactly "P is J or lies under J, component-wise";
 * - the jail rule of workspace.plan: for R = normalize(B) that does not
 *   climb out with "..", normalize(J "/" B) is J or J "/" R, and contained. */
#include "hcp_core.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *a, const char *b)
{
    fprintf(stderr, "paths: %s: \"%s\" \"%s\"\n", what, a, b ? b : "");
    abort();
}

/* Reference: a stack of components; ".." pops a name, is dropped at the
 * root of an absolute path, and kept at the front of a relative one. */
static char *reference(const char *in)
{
    size_t len = strlen(in);
    char *out = malloc(len + 2), *tmp = strdup(in);
    const char **stack = malloc((len / 2 + 2) * sizeof *stack);
    size_t n = 0, leading_up = 0;
    int abs = in[0] == '/';
    char *save = NULL;

    for (char *c = strtok_r(tmp, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (strcmp(c, ".") == 0)
            continue;
        if (strcmp(c, "..") == 0) {
            if (n > leading_up)
                n--;
            else if (!abs)
                stack[n++] = "..", leading_up++;
            continue;
        }
        stack[n++] = c;
    }
    out[0] = '\0';
    if (abs)
        strcpy(out, "/");
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            strcat(out, "/");
        strcat(out, stack[i]);
    }
    if (out[0] == '\0')
        strcpy(out, ".");
    free(stack);
    free(tmp);
    return out;
}

/* normalize into a heap buffer of exactly `size` bytes */
static long norm_exact(const char *in, size_t size, char **outp)
{
    char *buf = malloc(size ? size : 1);
    long n = hcp_path_normalize(in, buf, size);
    *outp = buf;
    return n;
}

static char *normalize_checked(const char *in)
{
    char *out, *other, *shorter;
    size_t len = strlen(in), enough = len + 1 < 2 ? 2 : len + 1;
    long n = norm_exact(in, enough, &out);
    if (n < 0)
        fail("max(strlen + 1, 2) bytes were not enough", in, NULL);
    if ((size_t)n != strlen(out))
        fail("returned length differs from the output's", in, out);
    char *ref = reference(in);
    if (strcmp(out, ref) != 0)
        fail("differs from the reference", in, ref);
    free(ref);
    for (size_t size = 0; size < enough; size += 1 + size / 4) {
        long m = norm_exact(in, size, &other);
        if (m != -1 && (m != n || strcmp(other, out) != 0))
            fail("a smaller buffer gave another answer", in, out);
        if (m != -1 && size < (size_t)n + 1)
            fail("an answer in a buffer too small for it", in, out);
        free(other);
    }
    if (norm_exact(in, (size_t)n, &shorter) != -1)
        fail("accepted a buffer one byte short", in, out);
    free(shorter);
    char *again;
    if (norm_exact(out, strlen(out) + 2, &again) < 0 || strcmp(again, out) != 0)
        fail("normalising twice changed it", in, out);
    free(again);
    return out;
}

static int climbs(const char *rel)
{
    return strcmp(rel, "..") == 0 || strncmp(rel, "../", 3) == 0;
}

static void check_contains(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *ja = malloc(la + 2), *pb = malloc(lb + 2);
    ja[0] = pb[0] = '/';
    memcpy(ja + 1, a, la + 1);
    memcpy(pb + 1, b, lb + 1);
    char *j = normalize_checked(ja), *p = normalize_checked(pb);
    size_t lj = strlen(j);
    int want = strcmp(j, "/") == 0 || (strncmp(j, p, lj) == 0 && (p[lj] == '\0' || p[lj] == '/'));
    if (hcp_path_contains(j, p) != want)
        fail(want ? "contains missed a path under the base" : "contains took a path outside the base", j, p);
    if (!hcp_path_contains(j, j))
        fail("a path does not contain itself", j, NULL);

    /* the jail rule: J "/" B, with B's leading slashes dropped as plan does */
    const char *rel = b;
    while (*rel == '/')
        rel++;
    char *r = normalize_checked(rel);
    if (!climbs(r)) {
        char *joined = malloc(lj + strlen(rel) + 2);
        sprintf(joined, "%s/%s", j, rel);
        char *inside = normalize_checked(joined);
        char *expect = malloc(lj + strlen(r) + 2);
        if (strcmp(r, ".") == 0)
            strcpy(expect, j);
        else
            sprintf(expect, "%s%s%s", j, strcmp(j, "/") == 0 ? "" : "/", r);
        if (strcmp(inside, expect) != 0)
            fail("a reference that does not climb moved", joined, inside);
        if (!hcp_path_contains(j, inside))
            fail("a reference that does not climb left the jail", j, inside);
        free(joined);
        free(inside);
        free(expect);
    }
    free(r);
    free(j);
    free(p);
    free(ja);
    free(pb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    /* C strings: the input up to its first NUL, split at the first newline */
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    char *nl = strchr(s, '\n');
    const char *a = s, *b = "";
    if (nl) {
        *nl = '\0';
        b = nl + 1;
    }
    free(normalize_checked(a));
    free(normalize_checked(b));
    check_contains(a, b);
    /* unnormalised arguments must not crash it either */
    (void)hcp_path_contains(a, b);
    free(s);
    return 0;
}
