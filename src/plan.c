/* plan.c — the launch plan as one position-independent blob: what the C
 * module hands the spawn helper (build/libexec/hcp-spawn) through a memfd.
 * The blob holds copies of struct hcp_launch and struct hcp_isolation, the
 * rootfs entries, argv and envp, and every string they point to; each
 * pointer is stored as its offset in the blob (0 for NULL). Both sides are
 * built from the same headers by the same compiler, so the layouts agree;
 * the header records the sizes anyway and a mismatch is refused. The writer
 * runs in the parent (it may allocate); the reader in the helper (it may
 * not: it fixes the pointers in place, in a private mapping). */
#include "spawn.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PLAN_MAGIC 0x31706368u   /* "hcp1" */

struct plan_hdr {
    uint32_t magic, size_launch, size_iso, size_ent;
    uint64_t total, off_launch, off_iso;
};

#ifndef HCP_HELPER   /* the writer is the C module's; the helper only reads */

struct writer { char *buf; size_t len; };

static size_t align8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

static size_t str_size(const char *s)
{
    return s ? strlen(s) + 1 : 0;
}

/* Appends s and returns its offset (0 for NULL). */
static uintptr_t put_str(struct writer *w, const char *s)
{
    if (!s)
        return 0;
    size_t n = strlen(s) + 1, at = w->len;
    memcpy(w->buf + at, s, n);
    w->len += n;
    return (uintptr_t)at;
}

static size_t vec_count(char **v)
{
    size_t n = 0;
    while (v[n])
        n++;
    return n;
}

/* Appends the slots of a NULL-terminated vector (filled later by fill_vec)
 * and returns their offset. */
static size_t put_slots(struct writer *w, size_t n)
{
    size_t at = w->len;
    memset(w->buf + at, 0, (n + 1) * sizeof(uintptr_t));
    w->len += (n + 1) * sizeof(uintptr_t);
    return at;
}

static void fill_vec(struct writer *w, size_t at, char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uintptr_t off = put_str(w, v[i]);
        memcpy(w->buf + at + i * sizeof off, &off, sizeof off);
    }
}

#define AS_PTR(type, off) ((type)(uintptr_t)(off))

static size_t plan_size(const struct hcp_launch *l)
{
    const struct hcp_isolation *iso = l->iso;
    size_t n = align8(sizeof(struct plan_hdr)) + align8(sizeof *l) + align8(sizeof *iso);
    n += align8((size_t)iso->rootfs.n * sizeof *iso->rootfs.e);
    n += align8((size_t)iso->rootfs.nbase * sizeof *iso->rootfs.base);
    for (int i = 0; i < iso->rootfs.nbase; i++)
        n += str_size(iso->rootfs.base[i].name) + str_size(iso->rootfs.base[i].link);
    size_t argc = vec_count(l->argv), envc = vec_count(l->envp);
    n += (argc + 1 + envc + 1) * sizeof(uintptr_t);
    n += str_size(l->path) + str_size(l->cwd);
    for (size_t i = 0; i < argc; i++)
        n += str_size(l->argv[i]);
    for (size_t i = 0; i < envc; i++)
        n += str_size(l->envp[i]);
    for (int i = 0; i < iso->nproc_rules; i++)
        n += str_size(iso->proc_rules[i].path);
    for (int i = 0; i < iso->rootfs.n; i++)
        n += str_size(iso->rootfs.e[i].dest) + str_size(iso->rootfs.e[i].src);
    for (int i = 0; i < iso->stage.n; i++)
        n += str_size(iso->stage.e[i].path) + str_size(iso->stage.e[i].beneath) +
             str_size(iso->stage.e[i].rel);
    return n + 1;   /* a final NUL: no string can run past the blob */
}

/* Fills w (sized by plan_size) with the plan. */
static void plan_fill(struct writer *w, const struct hcp_launch *l)
{
    const struct hcp_isolation *src = l->iso;
    struct plan_hdr hdr = { PLAN_MAGIC, sizeof *l, sizeof *src, sizeof *src->rootfs.e, 0, 0, 0 };
    struct hcp_launch lc = *l;
    struct hcp_isolation iso = *src;
    iso.egress = NULL;   /* the runtime's proxy: nothing the helper may touch */
    w->len = align8(sizeof hdr);
    hdr.off_launch = w->len;
    w->len += align8(sizeof lc);
    hdr.off_iso = w->len;
    w->len += align8(sizeof iso);
    size_t off_ent = w->len;
    struct hcp_rootfs_ent *ents = (struct hcp_rootfs_ent *)(void *)(w->buf + off_ent);
    w->len += align8((size_t)iso.rootfs.n * sizeof *ents);
    size_t off_base = w->len;
    struct hcp_base_item *items = (struct hcp_base_item *)(void *)(w->buf + off_base);
    w->len += align8((size_t)iso.rootfs.nbase * sizeof *items);
    size_t argc = vec_count(l->argv), envc = vec_count(l->envp);
    size_t off_argv = put_slots(w, argc), off_envp = put_slots(w, envc);
    fill_vec(w, off_argv, l->argv, argc);
    fill_vec(w, off_envp, l->envp, envc);
    lc.path = AS_PTR(const char *, put_str(w, l->path));
    lc.cwd = AS_PTR(const char *, put_str(w, l->cwd));
    lc.argv = AS_PTR(char **, off_argv);
    lc.envp = AS_PTR(char **, off_envp);
    lc.iso = AS_PTR(const struct hcp_isolation *, hdr.off_iso);
    for (int i = 0; i < iso.nproc_rules; i++)
        iso.proc_rules[i].path = AS_PTR(const char *, put_str(w, src->proc_rules[i].path));
    for (int i = 0; i < iso.rootfs.n; i++) {
        ents[i] = src->rootfs.e[i];
        ents[i].dest = AS_PTR(const char *, put_str(w, src->rootfs.e[i].dest));
        ents[i].src = AS_PTR(const char *, put_str(w, src->rootfs.e[i].src));
    }
    iso.rootfs.e = AS_PTR(struct hcp_rootfs_ent *, iso.rootfs.n ? off_ent : 0);
    for (int i = 0; i < iso.rootfs.nbase; i++) {
        items[i] = src->rootfs.base[i];
        items[i].name = AS_PTR(const char *, put_str(w, src->rootfs.base[i].name));
        items[i].link = AS_PTR(const char *, put_str(w, src->rootfs.base[i].link));
    }
    iso.rootfs.base = AS_PTR(const struct hcp_base_item *, iso.rootfs.nbase ? off_base : 0);
    for (int i = 0; i < iso.stage.n; i++) {
        iso.stage.e[i].path = AS_PTR(const char *, put_str(w, src->stage.e[i].path));
        iso.stage.e[i].beneath = AS_PTR(const char *, put_str(w, src->stage.e[i].beneath));
        iso.stage.e[i].rel = AS_PTR(const char *, put_str(w, src->stage.e[i].rel));
    }
    w->buf[w->len++] = '\0';
    hdr.total = w->len;
    memcpy(w->buf, &hdr, sizeof hdr);
    memcpy(w->buf + hdr.off_launch, &lc, sizeof lc);
    memcpy(w->buf + hdr.off_iso, &iso, sizeof iso);
}

int hcp_plan_write(int fd, const struct hcp_launch *l)
{
    size_t total = plan_size(l);
    struct writer w = { calloc(1, total), 0 };
    if (!w.buf)
        return -1;
    plan_fill(&w, l);
    size_t off = 0;
    while (off < w.len) {
        ssize_t n = write(fd, w.buf + off, w.len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            free(w.buf);
            errno = e;
            return -1;
        }
        off += (size_t)n;
    }
    free(w.buf);
    return 0;
}

int hcp_plan_memfd(const struct hcp_launch *l)
{
    int fd = memfd_create("hcp-plan", MFD_CLOEXEC);
    if (fd < 0 || hcp_plan_write(fd, l) == 0)
        return fd;
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}

int hcp_plan_fds(const struct hcp_launch *l, int *fds)
{
    struct hcp_launch lc = *l;
    struct hcp_isolation isoc = *l->iso;
    int *slots[HCP_PLAN_FDS], n = 0;
    int ns = hcp_plan_fd_slots(&lc, &isoc, slots);
    for (int i = 0; i < ns; i++)
        if (*slots[i] >= 0)
            fds[n++] = *slots[i];
    return n;
}

#endif

/* ---- the helper's side --------------------------------------------------- */

/* A pointer slot holding an offset: turned into a pointer into the blob. */
static int fix(char *blob, size_t len, const void *slot)
{
    uintptr_t off;
    memcpy(&off, slot, sizeof off);
    if (off == 0)
        return 0;
    if (off >= len)
        return -1;
    char *p = blob + off;
    memcpy((void *)(uintptr_t)slot, &p, sizeof p);
    return 0;
}

static int fix_vec(char *blob, size_t len, char **v)
{
    for (size_t i = 0;; i++) {
        if ((size_t)((char *)&v[i + 1] - blob) > len)
            return -1;
        if (!v[i])
            return 0;
        if (fix(blob, len, &v[i]) < 0)
            return -1;
    }
}

int hcp_plan_read(char *blob, size_t len, struct hcp_launch *l, struct hcp_isolation *iso)
{
    struct plan_hdr hdr;
    if (len < sizeof hdr)
        return errno = EINVAL, -1;
    memcpy(&hdr, blob, sizeof hdr);
    if (hdr.magic != PLAN_MAGIC || hdr.size_launch != sizeof *l || hdr.size_iso != sizeof *iso ||
        hdr.size_ent != sizeof *iso->rootfs.e || hdr.total != len || blob[len - 1] != '\0' ||
        hdr.off_launch + sizeof *l > len || hdr.off_iso + sizeof *iso > len)
        return errno = EINVAL, -1;
    memcpy(l, blob + hdr.off_launch, sizeof *l);
    memcpy(iso, blob + hdr.off_iso, sizeof *iso);
    int bad = fix(blob, len, &l->path) || fix(blob, len, &l->cwd) ||
              fix(blob, len, &l->argv) || fix(blob, len, &l->envp) || !l->argv || !l->envp ||
              (size_t)((char *)l->argv - blob) >= len || (size_t)((char *)l->envp - blob) >= len ||
              fix_vec(blob, len, l->argv) || fix_vec(blob, len, l->envp);
    for (int i = 0; !bad && i < iso->nproc_rules && i < HCP_PROC_RULES; i++)
        bad = fix(blob, len, &iso->proc_rules[i].path);
    bad = bad || iso->nproc_rules > HCP_PROC_RULES || iso->stage.n > HCP_STAGE_MAX ||
          iso->rootfs.n < 0 || fix(blob, len, &iso->rootfs.e) ||
          (iso->rootfs.n > 0 && (size_t)((char *)iso->rootfs.e - blob) +
                                (size_t)iso->rootfs.n * sizeof *iso->rootfs.e > len);
    for (int i = 0; !bad && i < iso->rootfs.n; i++)
        bad = fix(blob, len, &iso->rootfs.e[i].dest) || fix(blob, len, &iso->rootfs.e[i].src);
    bad = bad || iso->rootfs.nbase < 0 || fix(blob, len, &iso->rootfs.base) ||
          (iso->rootfs.nbase > 0 && (!iso->rootfs.base || (size_t)((const char *)iso->rootfs.base - blob) +
                                     (size_t)iso->rootfs.nbase * sizeof *iso->rootfs.base > len));
    for (int i = 0; !bad && i < iso->rootfs.nbase; i++) {
        struct hcp_base_item *b = (struct hcp_base_item *)(uintptr_t)&iso->rootfs.base[i];
        bad = fix(blob, len, &b->name) || fix(blob, len, &b->link) || !b->name;
    }
    for (int i = 0; !bad && i < iso->stage.n; i++)
        bad = fix(blob, len, &iso->stage.e[i].path) || fix(blob, len, &iso->stage.e[i].beneath) ||
              fix(blob, len, &iso->stage.e[i].rel);
    if (bad)
        return errno = EINVAL, -1;
    l->iso = iso;
    return 0;
}

int hcp_plan_map(int fd, struct hcp_launch *l, struct hcp_isolation *iso)
{
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size <= 0) {
        close(fd);
        return -1;
    }
    char *blob = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    close(fd);
    return blob == MAP_FAILED ? -1 : hcp_plan_read(blob, (size_t)st.st_size, l, iso);
}

int hcp_plan_fd_slots(struct hcp_launch *l, struct hcp_isolation *iso, int **slots)
{
    int n = 0;
    int *fixed[] = { &l->exe_fd, &l->in_fd, &l->out_fd, &l->err_fd, &l->status_fd, &l->end_fd,
                     &iso->landlock_fd, &iso->cgroup_fd, &iso->netns_fd, &iso->userns_fd, &iso->egress_fd };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        slots[n++] = fixed[i];
    if (iso->rootfs.base)   /* base_fd means nothing without a base view */
        slots[n++] = &iso->rootfs.base_fd;
    for (int i = 0; i < l->ndata && i < HCP_DATA_FDS; i++)
        slots[n++] = &l->data_fd[i];
    return n;
}
