/* test_paths.c — the path helpers of hcp.core, tested from C.
 *
 * hcp_path_normalize and hcp_path_contains directly (table-driven), then
 * core.resolve_beneath's realpath fallback, which a kernel with openat2
 * never takes: a child process makes openat2 fail with ENOSYS through a
 * seccomp filter and runs the same refusals as the openat2 path. Last,
 * hcp_rootfs_extends: when the early child's view, begun before its call's
 * plan, may be finished with that plan (src/early.c), and the one sender
 * and receiver of descriptors its plan goes through; and the trim of the
 * compiled-module cache's chunks (src/luac_trim.c), and the capture buffer
 * that becomes a Lua string without a copy (src/strbuf.c). */
#include "hcp_core.h"
#include "hcp_lua.h"
#include "isolation.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include <lauxlib.h>
#include <lualib.h>

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

static int passed, failed;

#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        if (cond) {                                                         \
            passed++;                                                       \
        } else {                                                            \
            failed++;                                                       \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fputc('\n', stderr);                                            \
        }                                                                   \
    } while (0)

static void norm(const char *in, const char *want)
{
    char out[256];
    long n = hcp_path_normalize(in, out, sizeof out);

    CHECK(n >= 0 && strcmp(out, want) == 0 && (size_t)n == strlen(want),
          "normalize(\"%s\") = \"%s\" (%ld), want \"%s\"", in, n >= 0 ? out : "", n, want);
}

static void test_normalize(void)
{
    static const char *const cases[][2] = {
        {"//etc", "/etc"},
        {"/tmp/../etc", "/etc"},
        {"/../etc", "/etc"},
        {"/..", "/"},
        {"a/../../b", "../b"},
        {"", "."},
        {"./x/", "x"},
        {"/", "/"},
        {"//", "/"},
        {"///a//b///", "/a/b"},
        {".", "."},
        {"./", "."},
        {"..", ".."},
        {"../..", "../.."},
        {"../a/..", ".."},
        {"a/..", "."},
        {"a/b/../..", "."},
        {"a/b/../../..", ".."},
        {"/a/./b/.", "/a/b"},
        {"/a/b/c/../../d", "/a/d"},
        {"...", "..."},
        {"/..x/.y", "/..x/.y"},
        {"a/.../b", "a/.../b"},
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
        norm(cases[i][0], cases[i][1]);
}

/* The output must fit exactly, terminating NUL included, never truncated. */
static void test_normalize_sizes(void)
{
    char out[16];

    memset(out, 'Z', sizeof out);
    CHECK(hcp_path_normalize("/abc", out, 5) == 4 && strcmp(out, "/abc") == 0, "exact fit");
    CHECK(hcp_path_normalize("/abc", out, 4) == -1, "one byte short");
    CHECK(hcp_path_normalize("", out, 2) == 1 && strcmp(out, ".") == 0, "\".\" needs 2");
    CHECK(hcp_path_normalize("", out, 1) == -1, "\".\" in 1 byte");
    CHECK(hcp_path_normalize("/", out, 1) == -1, "\"/\" in 1 byte");
    CHECK(hcp_path_normalize("/", out, 0) == -1, "zero size");
    CHECK(hcp_path_normalize("a", out, 0) == -1, "zero size, relative");
    CHECK(hcp_path_normalize("/a/b/../c", out, 5) == 4 && strcmp(out, "/a/c") == 0,
          "output shorter than input fits");
    memset(out, 'Z', sizeof out);
    CHECK(hcp_path_normalize("/abcdef", out, 4) == -1 && out[4] == 'Z',
          "no write past outsz");

    /* The Lua wrapper's strlen+2 is always enough. */
    {
        static const char *const inputs[] = {"", ".", "/", "a", "..", "//", "./x/", "a/../../b"};
        size_t i;
        for (i = 0; i < sizeof inputs / sizeof inputs[0]; i++)
            CHECK(hcp_path_normalize(inputs[i], out, strlen(inputs[i]) + 2) >= 0,
                  "strlen+2 suffices for \"%s\"", inputs[i]);
    }
}

static void test_contains(void)
{
    static const struct { const char *base, *path; int want; } cases[] = {
        {"/a/pre", "/a/prefix", 0},
        {"/a/pre", "/a/pre", 1},
        {"/a/pre", "/a/pre/x", 1},
        {"/a/pre", "/a", 0},
        {"/a/pre", "/a/pr", 0},
        {"/", "/", 1},
        {"/", "/etc/passwd", 1},
        {"/etc", "/", 0},
        {"/etc", "/etcetera", 0},
        {"/etc", "/etc/", 1},
        {"/a", "a", 0},   /* relative paths are never contained */
        {"a", "a/b", 0},
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(hcp_path_contains(cases[i].base, cases[i].path) == cases[i].want,
              "contains(\"%s\", \"%s\") != %d", cases[i].base, cases[i].path, cases[i].want);
}

/* ---- resolve_beneath without openat2 ---------------------------------- */

static void write_file(const char *path, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

    if (fd < 0 || write(fd, "#!/bin/sh\n", 10) != 10 || fchmod(fd, mode) != 0) {
        perror(path);
        exit(2);
    }
    close(fd);
}

/* Calls core.resolve_beneath(root, rel); returns the errno it reports, 0 on
 * success (with the path copied to out). */
static int call_beneath(lua_State *L, const char *root, const char *rel, char *out, size_t outsz)
{
    int err = 0;

    lua_settop(L, 1);  /* the module table */
    lua_getfield(L, 1, "resolve_beneath");
    lua_pushstring(L, root);
    lua_pushstring(L, rel);
    if (lua_pcall(L, 2, 3, 0) != LUA_OK) {
        fprintf(stderr, "resolve_beneath raised: %s\n", lua_tostring(L, -1));
        return -1;
    }
    if (lua_isstring(L, -3))
        snprintf(out, outsz, "%s", lua_tostring(L, -3));
    else
        err = (int)lua_tointeger(L, -1);
    return err;
}

static int deny_openat2(void)
{
#if defined(__x86_64__)
#define TEST_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define TEST_ARCH AUDIT_ARCH_AARCH64
#endif
#ifdef TEST_ARCH
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TEST_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof code / sizeof code[0], code};

    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        return -1;
    return 0;
#else
    return -1;
#endif
}

/* Runs in a child, which reports its counts to the parent through a pipe. */
static void beneath_checks(const char *root, int expect_fallback)
{
    char path[128], want[128], got[4096];
    lua_State *L = luaL_newstate();
    int err;

    luaL_openlibs(L);
    lua_settop(L, 0);
    luaopen_hcp_core(L);  /* the module table, at index 1 from now on */

    if (expect_fallback)
        CHECK(syscall(SYS_openat2, AT_FDCWD, ".", NULL, 0) < 0 && errno == ENOSYS,
              "openat2 is denied in the child");

    snprintf(want, sizeof want, "%s/bin/ok", root);
    err = call_beneath(L, root, "bin/ok", got, sizeof got);
    CHECK(err == 0 && strcmp(got, want) == 0, "bin/ok: err %d, got %s", err, err ? "" : got);
    err = call_beneath(L, root, "bin/./sub/../ok", got, sizeof got);
    CHECK(err == 0 && strcmp(got, want) == 0, "bin/./sub/../ok: err %d", err);
    err = call_beneath(L, root, "bin/inlink", got, sizeof got);
    CHECK(err == 0 && strcmp(got, want) == 0, "relative link inside: err %d", err);
    CHECK(call_beneath(L, root, "bin/x", got, sizeof got) == EXDEV, "absolute link out");
    CHECK(call_beneath(L, root, "bin/up", got, sizeof got) == EXDEV, "relative link out");
    CHECK(call_beneath(L, root, "../outside", got, sizeof got) == EXDEV, "../outside");
    CHECK(call_beneath(L, root, "bin/../../outside", got, sizeof got) == EXDEV, "bin/../../x");
    CHECK(call_beneath(L, root, "../nonexistent", got, sizeof got) == EXDEV, "../nonexistent");
    CHECK(call_beneath(L, root, "bin/noexec", got, sizeof got) == EACCES, "noexec");
    CHECK(call_beneath(L, root, "bin", got, sizeof got) == EACCES, "a directory");
    CHECK(call_beneath(L, root, "bin/missing", got, sizeof got) == ENOENT, "missing");
    snprintf(path, sizeof path, "%s/missing-root", root);
    CHECK(call_beneath(L, path, "bin/ok", got, sizeof got) == ENOENT, "missing root");
    lua_close(L);
}

static void test_beneath(void)
{
    char tmpl[] = "/tmp/test_paths.XXXXXX";
    char root[64], p[128];
    const char *dir = mkdtemp(tmpl);
    int pfd[2];
    int mode;

    if (!dir) {
        perror("mkdtemp");
        exit(2);
    }
    snprintf(root, sizeof root, "%s/root", dir);
    snprintf(p, sizeof p, "%s/outside", dir);
    write_file(p, 0755);
    if (mkdir(root, 0755) != 0)
        perror("mkdir root");
    snprintf(p, sizeof p, "%s/bin", root);
    if (mkdir(p, 0755) != 0)
        perror("mkdir bin");
    snprintf(p, sizeof p, "%s/bin/ok", root);
    write_file(p, 0755);
    snprintf(p, sizeof p, "%s/bin/noexec", root);
    write_file(p, 0644);
    snprintf(p, sizeof p, "%s/bin/x", root);
    if (symlink("/usr/bin/id", p) != 0)
        perror("symlink x");
    snprintf(p, sizeof p, "%s/bin/up", root);
    if (symlink("../../outside", p) != 0)
        perror("symlink up");
    snprintf(p, sizeof p, "%s/bin/inlink", root);
    if (symlink("ok", p) != 0)
        perror("symlink inlink");
    snprintf(p, sizeof p, "%s/bin/sub", root);
    if (mkdir(p, 0755) != 0)
        perror("mkdir sub");

    /* Mode 0: openat2 as the kernel has it; mode 1: openat2 denied. */
    for (mode = 0; mode < 2; mode++) {
        pid_t pid;
        int st, counts[2] = {0, 0};

        if (pipe(pfd) != 0) {
            perror("pipe");
            exit(2);
        }
        fflush(NULL);
        pid = fork();
        if (pid < 0) {
            perror("fork");
            exit(2);
        }
        if (pid == 0) {
            close(pfd[0]);
            passed = failed = 0;
            if (mode == 1 && deny_openat2() != 0) {
                fprintf(stderr, "test_paths: cannot install seccomp filter, fallback untested\n");
                _exit(0);
            }
            beneath_checks(root, mode);
            counts[0] = passed;
            counts[1] = failed;
            if (write(pfd[1], counts, sizeof counts) != (ssize_t)sizeof counts)
                _exit(3);
            _exit(0);
        }
        close(pfd[1]);
        if (read(pfd[0], counts, sizeof counts) == (ssize_t)sizeof counts) {
            passed += counts[0];
            failed += counts[1];
        }
        close(pfd[0]);
        if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            failed++;
            fprintf(stderr, "FAIL: resolve_beneath child (mode %d) died: status %d\n", mode, st);
        }
    }

    {  /* best-effort cleanup of the temp tree */
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "test_paths: could not remove %s\n", dir);
    }
}


/* ---- hcp_rootfs_extends ------------------------------------------------- */

#define ENT(d, s, k, rw, dir) { d, s, k, rw, dir, 0 }

static struct hcp_rootfs view_of(struct hcp_rootfs_ent *e, int n)
{
    struct hcp_rootfs rf;
    memset(&rf, 0, sizeof rf);
    rf.n = n;
    rf.e = e;
    rf.base_fd = -1;
    strcpy(rf.tmp_opts, "mode=1777,size=67108864");
    return rf;
}

static void test_extends(void)
{
    unsigned char done[HCP_EARLY_MAX];
    struct hcp_rootfs_ent ahead[] = {
        ENT("/dev", NULL, RF_DEV, 0, 1), ENT("/etc/passwd", "/etc/passwd", RF_BIND, 0, 0),
        ENT("/tmp", NULL, RF_TMP, 0, 1), ENT("/usr", "/usr", RF_BIND, 0, 1),
    };
    struct hcp_rootfs e = view_of(ahead, 4);
    /* the call's own paths after the system's, beneath /tmp and /usr */
    struct hcp_rootfs_ent call[] = {
        ENT("/dev", NULL, RF_DEV, 0, 1), ENT("/etc/passwd", "/etc/passwd", RF_BIND, 0, 0),
        ENT("/tmp", NULL, RF_TMP, 0, 1), ENT("/tmp/jail", "/tmp/jail", RF_BIND, 1, 1),
        ENT("/usr", "/usr", RF_BIND, 0, 1), ENT("/usr/local/pack", "/usr/local/pack", RF_BIND, 0, 1),
    };
    struct hcp_rootfs p = view_of(call, 6);
    CHECK(hcp_rootfs_extends(&e, &p, done) == 1, "a call's view over the system's\n");
    CHECK(done[0] && done[1] && done[2] && !done[3] && done[4] && !done[5], "done marks the entries begun\n");
    CHECK(hcp_rootfs_extends(&e, &e, done) == 1 && done[0] && done[3], "the same view\n");

    struct hcp_rootfs_ent c2[6];
    memcpy(c2, call, sizeof call);
    c2[1].src = "/run/passwd";   /* a link that changed since */
    p = view_of(c2, 6);
    CHECK(hcp_rootfs_extends(&e, &p, done) == 0, "another source\n");
    memcpy(c2, call, sizeof call);
    c2[4].rw = 1;
    p = view_of(c2, 6);
    CHECK(hcp_rootfs_extends(&e, &p, done) == 0, "read-write where begun read-only\n");
    memcpy(c2, call, sizeof call);
    c2[0].kind = RF_BIND;
    c2[0].src = "/dev";
    p = view_of(c2, 6);
    CHECK(hcp_rootfs_extends(&e, &p, done) == 0, "another kind\n");
    p = view_of(call + 1, 5);   /* no /dev */
    CHECK(hcp_rootfs_extends(&e, &p, done) == 0, "an entry begun is not the plan's\n");

    /* order: the plan's own entries at or above one begun, or beneath one
     * begun that the plan places later */
    struct hcp_rootfs_ent c3[] = {
        ENT("/", "/", RF_BIND, 0, 1), ENT("/dev", NULL, RF_DEV, 0, 1),
        ENT("/etc/passwd", "/etc/passwd", RF_BIND, 0, 0), ENT("/tmp", NULL, RF_TMP, 0, 1),
        ENT("/usr", "/usr", RF_BIND, 0, 1),
    };
    p = view_of(c3, 5);
    CHECK(hcp_rootfs_extends(&e, &p, done) == 0, "/ above everything begun\n");
    c3[0].dest = c3[0].src = "/etc";
    CHECK(hcp_rootfs_extends(&e, &p, done) == 0, "/etc above /etc/passwd\n");
    c3[0].dest = c3[0].src = "/usr";
    CHECK(hcp_rootfs_extends(&e, &p, done) == 0, "/usr twice, the plan's own first\n");
    c3[0].dest = c3[0].src = "/usr/lib/x";
    CHECK(hcp_rootfs_extends(&e, &p, done) == 0, "beneath /usr, placed before it\n");
    c3[0].dest = c3[0].src = "/usrx";
    CHECK(hcp_rootfs_extends(&e, &p, done) == 1, "/usrx is not beneath /usr\n");
    struct hcp_rootfs_ent swapped[] = { ahead[0], ahead[2], ahead[1], ahead[3] };
    p = view_of(swapped, 4);
    CHECK(hcp_rootfs_extends(&e, &p, done) == 0, "begun in another order\n");

    /* options of the whole view */
    p = view_of(call, 6);
    strcpy(p.tmp_opts, "mode=1777,size=1048576");
    CHECK(hcp_rootfs_extends(&e, &p, done) == 0, "another /tmp\n");
    p = view_of(call, 6);
    p.legacy = 1;
    CHECK(hcp_rootfs_extends(&e, &p, done) == 0, "the legacy way\n");
    p = view_of(call, 6);
    p.is_base = 1;
    CHECK(hcp_rootfs_extends(&e, &p, done) == 0, "a base view\n");
    p = view_of(call, 6);
    p.n = HCP_EARLY_MAX + 1;
    CHECK(hcp_rootfs_extends(&e, &p, done) == 0, "too many entries\n");
    p = view_of(call, 6);
    CHECK(hcp_rootfs_extends(&e, &p, done) == 1, "and back\n");
}

/* ---- hcp_send_fds / hcp_recv_fds ------------------------------------------ */

static int open_fds(void)
{
    int n = 0;
    for (int fd = 0; fd < 256; fd++)
        if (fcntl(fd, F_GETFD) >= 0)
            n++;
    return n;
}

static void test_fds(void)
{
    int sv[2], fds[4], got[4];
    char byte = 0;
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0, "socketpair\n");
    for (int i = 0; i < 3; i++)
        fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int before = open_fds();
    CHECK(hcp_send_fds(sv[0], 'p', fds, 2) == 0, "two sent\n");
    int n = hcp_recv_fds(sv[1], 0, &byte, got, 2);
    CHECK(n == 2 && byte == 'p', "two received with the byte: %d %c\n", n, byte);
    CHECK(n == 2 && (fcntl(got[0], F_GETFD) & FD_CLOEXEC) && (fcntl(got[1], F_GETFD) & FD_CLOEXEC),
          "received close-on-exec\n");
    for (int i = 0; i < n && i < 4; i++)
        close(got[i]);
    /* more than the receiver has room for: nothing kept, nothing leaked */
    CHECK(hcp_send_fds(sv[0], 'p', fds, 3) == 0, "three sent\n");
    errno = 0;
    n = hcp_recv_fds(sv[1], 0, &byte, got, 2);
    CHECK(n == -1 && errno == EMSGSIZE, "three for two: %d %s\n", n, strerror(errno));
    CHECK(open_fds() == before, "none left open: %d against %d\n", open_fds(), before);
    /* none at all, then EOF */
    CHECK(write(sv[0], "x", 1) == 1, "a byte alone\n");
    n = hcp_recv_fds(sv[1], 0, &byte, got, 2);
    CHECK(n == 0 && byte == 'x', "a message without descriptors: %d\n", n);
    CHECK(hcp_send_fds(sv[0], 'p', fds, 0) == -1 && errno == EINVAL, "none to send is a mistake\n");
    CHECK(hcp_send_fds(sv[0], 'p', fds, HCP_SEND_FDS_MAX + 1) == -1 && errno == EINVAL, "too many to send\n");
    close(sv[0]);
    CHECK(hcp_recv_fds(sv[1], 0, &byte, got, 2) == -2, "EOF\n");
    close(sv[1]);
    for (int i = 0; i < 3; i++)
        close(fds[i]);
}


/* ---- hcp_luac_trim -------------------------------------------------------- */

struct bytes { unsigned char p[65536]; size_t len; };

static int gather(lua_State *L, const void *p, size_t sz, void *ud)
{
    struct bytes *d = ud;
    (void)L;
    if (d->len + sz > sizeof d->p)
        return 1;
    memcpy(d->p + d->len, p, sz);
    d->len += sz;
    return 0;
}

/* What the probe chunk's function returns: the name of its first local,
 * a sum of the chunk's constants, and an error's traceback. */
static char *run_chunk(const unsigned char *chunk, size_t len)
{
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    int ok = luaL_loadbufferx(L, (const char *)chunk, len, "=unused", "b") == LUA_OK &&
             lua_pcall(L, 0, 1, 0) == LUA_OK && lua_pcall(L, 0, 1, 0) == LUA_OK;
    char *r = strdup(ok ? lua_tostring(L, -1) : "the chunk failed");
    lua_close(L);
    return r;
}

static void test_luac_trim(void)
{
    /* locals, upvalues, nested functions, every kind of constant, a long
     * string, and an error three calls deep */
    static const char src[] =
        "local answer, pi, big = 42, 3.5, 1 << 40\n"
        "local flags = { true, false, nil, 'short', string.rep('long ', 20) }\n"
        "local t = nil\n"
        "local function inner(depth)\n"
        "  local here = depth\n"
        "  if here == 0 then return t.field end\n"
        "  local deeper = inner(here - 1)\n"
        "  return deeper\n"
        "end\n"
        "return function()\n"
        "  local marker = answer\n"
        "  local _, trace = xpcall(inner, debug.traceback, 2)\n"
        "  return table.concat({ (debug.getlocal(1, 1)), tostring(marker + pi + big + #flags), trace }, '\\n')\n"
        "end\n";
    static struct bytes full, out, bad;
    lua_State *L = luaL_newstate();
    CHECK(luaL_loadbufferx(L, src, sizeof src - 1, "@probe.lua", "t") == LUA_OK, "the probe compiles");
    CHECK(lua_dump(L, gather, &full, 0) == 0 && full.len > 0, "dumped");
    lua_close(L);
    size_t len = full.len, n = hcp_luac_trim(full.p, len, out.p);
    CHECK(n > 0 && n < len, "trimmed to %zu of %zu bytes", n, len);

    /* the same constants, error, positions and traceback (the upvalues keep
     * their names); only the local's name is gone */
    char *want = run_chunk(full.p, len), *got = run_chunk(out.p, n);
    CHECK(strncmp(want, "marker\n", 7) == 0, "the chunk as dumped names its local: %s", want);
    CHECK(strncmp(got, "(temporary)\n", 12) == 0, "the trimmed chunk does not: %s", got);
    const char *rest_want = strchr(want, '\n'), *rest_got = strchr(got, '\n');
    CHECK(rest_want && rest_got && strcmp(rest_want, rest_got) == 0, "the same otherwise:\n%s\n---\n%s", want, got);
    CHECK(strstr(got, "probe.lua:6: attempt to index a nil value (upvalue 't')") != NULL &&
          strstr(got, "probe.lua:7: in ") != NULL && strstr(got, "'inner'") != NULL, "positions and names kept: %s", got);
    free(want);
    free(got);

    /* anything but a whole chunk as this Lua dumps it is refused, and
     * never read past its end (make check: ASan) */
    int refused = 1;
    for (size_t cut = 0; cut < len; cut++) {
        unsigned char *part = malloc(cut ? cut : 1);
        memcpy(part, full.p, cut);
        refused = refused && hcp_luac_trim(part, cut, bad.p) == 0;
        free(part);
    }
    CHECK(refused, "every truncation of the chunk is refused");
    memcpy(bad.p, full.p, len);
    bad.p[len] = 0x80;
    CHECK(hcp_luac_trim(bad.p, len + 1, out.p) == 0, "a byte left over is refused");
    memcpy(bad.p, full.p, len);
    bad.p[4] = 0x53;
    CHECK(hcp_luac_trim(bad.p, len, out.p) == 0, "another version's chunk is refused");
    memcpy(bad.p, full.p, len);
    memset(bad.p + 32, 0x7f, len - 32);   /* sizes that never end */
    CHECK(hcp_luac_trim(bad.p, len, out.p) == 0, "a size without its last byte is refused");
}

/* A Lua allocator that keeps each block's size in front of it: every
 * free and resize must name the size the block has (Lua's contract), and
 * what is live at the end must be nothing. */
struct sized {
    size_t live;
    int bad_osize;
    int big_strings;   /* string objects of 64 KiB or more Lua allocated */
};

static void *sized_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct sized *z = ud;
    size_t *h = ptr ? (size_t *)ptr - 2 : NULL;
    size_t old = h ? h[0] : 0;
    if (h && old != osize)
        z->bad_osize++;
    if (!h && osize == LUA_TSTRING && nsize >= 65536)
        z->big_strings++;
    if (nsize == 0) {
        z->live -= old;
        free(h);
        return NULL;
    }
    size_t *n = realloc(h, nsize + 2 * sizeof *n);
    if (!n)
        return NULL;
    z->live += nsize - old;
    n[0] = nsize;
    return n + 2;
}

/* An allocator that refuses every new string object past 1 KiB while armed. */
static void *failing_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    int *armed = ud;
    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    if (*armed && !ptr && osize == LUA_TSTRING && nsize > 1024)
        return NULL;
    return realloc(ptr, nsize);
}

static int init_buf(lua_State *L)
{
    hcp_strbuf_init(lua_touserdata(L, 1), L);
    return 0;
}

/* The measure a first buffer takes (a string of 4 KiB, made with the
 * state's allocator wrapped) fails for want of memory: the error reaches
 * the caller and the state has its own allocator back, not the wrapper
 * whose state lived on a stack frame that is gone. Runs before anything
 * measured (the measure is kept once taken). */
static void test_strbuf_nomem(void)
{
    int armed = 1;
    lua_State *L = lua_newstate(failing_alloc, &armed);
    struct hcp_strbuf b;
    lua_pushcfunction(L, init_buf);
    lua_pushlightuserdata(L, &b);
    int status = lua_pcall(L, 1, 0, 0);
    void *ud = NULL;
    lua_Alloc f = lua_getallocf(L, &ud);
    CHECK(status == LUA_ERRMEM, "the measure's want of memory is raised (status %d)", status);
    CHECK(f == failing_alloc && ud == &armed, "the state's own allocator is back");
    armed = 0;
    lua_pushcfunction(L, init_buf);
    lua_pushlightuserdata(L, &b);
    CHECK(lua_pcall(L, 1, 0, 0) == LUA_OK && b.head > 0, "with memory, the measure is taken");
    lua_close(L);
}

/* hcp_strbuf (src/strbuf.c): a capture's bytes become a Lua string without
 * a copy, the block allocated and freed through the state's allocator. */
static void test_strbuf(void)
{
    struct sized z = { 0, 0, 0 };
    lua_State *L = lua_newstate(sized_alloc, &z);
    struct hcp_strbuf b;
    hcp_strbuf_init(&b, L);
    CHECK(b.head > 0 && b.head <= 256, "this liblua keeps a long string's bytes at its object's end (%zu)", b.head);

    size_t max = (1 << 20) + 12345;
    while (hcp_strbuf_grow(&b, max) == 0) {
        for (size_t i = b.len; i < b.cap; i++)
            hcp_strbuf_data(&b)[i] = (char)('a' + i % 23);
        b.len = b.cap;
    }
    CHECK(b.len == max && b.cap == max, "grows to max exactly: %zu of %zu", b.len, max);
    CHECK(hcp_strbuf_grow(&b, max) == -1 && b.len == max, "full at max: no more room, the bytes kept");

    const char *data = hcp_strbuf_data(&b);
    hcp_strbuf_push(L, &b);
    size_t n;
    const char *s = lua_tolstring(L, -1, &n);
    CHECK(s == data && z.big_strings == 0, "the string is the buffer: no copy");
    int same = n == max && s[n] == '\0';
    for (size_t i = 0; same && i < n; i++)
        same = s[i] == (char)('a' + i % 23);
    CHECK(same, "the string holds the bytes, NUL-terminated");
    CHECK(b.block == NULL && b.len == 0 && b.cap == 0, "the buffer is empty after the push");
    lua_gc(L, LUA_GCCOLLECT);
    CHECK(lua_tolstring(L, -1, &n) == s && n == max, "the string survives a collection");
    lua_pop(L, 1);

    /* room left over: the block fitted to the string before Lua owns it
     * (Lua frees it with the string's size) */
    struct hcp_strbuf r;
    hcp_strbuf_init(&r, L);
    while (r.len < 300000 && hcp_strbuf_grow(&r, 1 << 20) == 0)
        r.len = r.cap;
    r.len = 300000;
    CHECK(r.cap > r.len, "room left: %zu of %zu", r.len, r.cap);
    memset(hcp_strbuf_data(&r), 'r', r.len);
    hcp_strbuf_push(L, &r);
    s = lua_tolstring(L, -1, &n);
    CHECK(z.big_strings == 0, "adopted too (under valgrind, realloc moves the block)");
    CHECK(n == 300000 && s[0] == 'r' && s[n - 1] == 'r' && s[n] == '\0', "the bytes, no more");
    lua_pop(L, 1);

    /* short: copied, the block freed */
    struct hcp_strbuf c;
    hcp_strbuf_init(&c, L);
    CHECK(hcp_strbuf_grow(&c, 100) == 0 && c.cap == 100, "a small max: one block of max bytes");
    memcpy(hcp_strbuf_data(&c), "short", 5);
    c.len = 5;
    data = hcp_strbuf_data(&c);
    hcp_strbuf_push(L, &c);
    s = lua_tolstring(L, -1, &n);
    CHECK(s != data && n == 5 && memcmp(s, "short", 5) == 0, "a short capture is copied");

    /* a size that would wrap around is refused, nothing allocated */
    struct hcp_strbuf w;
    hcp_strbuf_init(&w, L);
    w.len = w.cap = SIZE_MAX - 8;
    CHECK(hcp_strbuf_grow(&w, SIZE_MAX) == -1 && w.block == NULL, "no block size wraps around");
    w.len = w.cap = 0;

    /* empty, and a buffer freed unpushed */
    struct hcp_strbuf e;
    hcp_strbuf_init(&e, L);
    hcp_strbuf_push(L, &e);
    CHECK(lua_tolstring(L, -1, &n) && n == 0, "an empty capture is \"\"");
    hcp_strbuf_init(&e, L);
    CHECK(hcp_strbuf_grow(&e, 1 << 20) == 0, "room");
    hcp_strbuf_free(&e);
    hcp_strbuf_free(&e);
    CHECK(e.block == NULL, "freed, twice harmlessly");
    lua_close(L);
    CHECK(z.live == 0 && z.bad_osize == 0, "every block freed, each with its own size (%zu live, %d mismatched)",
          z.live, z.bad_osize);
}

int main(void)
{
    test_normalize();
    test_normalize_sizes();
    test_contains();
    test_beneath();
    test_extends();
    test_fds();
    test_strbuf_nomem();   /* first: the measure is kept once taken */
    test_luac_trim();
    test_strbuf();
    printf("test_paths: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
