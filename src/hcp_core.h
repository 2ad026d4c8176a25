/* hcp_core.h — private interface between the C files of hcp.core.
 * Each file owns one concern and registers its functions into the module
 * table that luaopen_hcp_core leaves on the stack. */
#ifndef HCP_CORE_H
#define HCP_CORE_H

#include <lua.h>
#include <lauxlib.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#define HCP_CORE_VERSION "0.1.0"

/* Registration hooks: each adds its functions to the table at the top of L. */
void hcp_register_paths(lua_State *L);
void hcp_register_spawn(lua_State *L);
void hcp_register_fs(lua_State *L);
void hcp_register_jail(lua_State *L);
void hcp_register_isolation(lua_State *L);
void hcp_register_poller(lua_State *L);
void hcp_register_pollable(lua_State *L);
void hcp_register_stdio(lua_State *L);
void hcp_register_egress(lua_State *L);   /* egress.c (issue 14) */
void hcp_register_json(lua_State *L);     /* json_decode.c: hcp.json.decode's fast path */
void hcp_register_calldirs(lua_State *L); /* calldirs.c: a call's directories made ahead, removed behind */
/* Wakes the calldirs worker if spares were asked for since: spawn.c calls it
 * once a child is started, while the caller waits for the child anyway. */
void hcp_calldirs_kick(void);

/* Removes a directory tree by descriptor, never through a link (a final
 * link is removed as a link); a missing path is success (fs.c). 0, or an
 * errno with *what naming the step ("rmdir ", ...) for the message. */
int hcp_rmtree(const char *path, const char **what);
/* The path argument of core.rmtree and core.rmtree_later: absolute, not
 * "/" (raises otherwise). */
const char *hcp_check_rmtree_path(lua_State *L, int idx);
/* mkdtemp(3) of parent/prefixXXXXXX: the path (malloc'd), or NULL with
 * errno (fs.c). */
char *hcp_mkdtemp(const char *parent, const char *prefix);
/* The arguments of core.mkdtemp (parent, optional prefix): parent
 * absolute, prefix without '/' (raises otherwise). */
const char *hcp_check_mkdtemp_args(lua_State *L, const char **prefix);
/* core.mkdtemp's answer: path (malloc'd, freed here) or, when NULL, a
 * directory made now; nil, message, errno when it cannot be made. */
int hcp_push_mkdtemp(lua_State *L, const char *parent, const char *prefix, char *path);
/* core.rmtree's answer: path removed now, true or nil, message, errno. */
int hcp_push_rmtree(lua_State *L, const char *path);

/* Lexical normalisation (paths.c). Writes at most outsz bytes including the
 * terminating NUL into out; returns the length or -1 if out is too small,
 * which includes too small for a longer prefix built on the way ("/abc/../d"
 * needs 5 bytes for its 2-byte result): strlen(in) + 1, and at least 2, is
 * always enough. */
long hcp_path_normalize(const char *in, char *out, size_t outsz);

/* openat2(2) with O_CLOEXEC added and the kernel's EAGAIN (a concurrent
 * rename under dirfd) retried a few times (paths.c). -1 with errno set;
 * ENOSYS on kernels without openat2, for the caller's own fallback. */
int hcp_openat2(int dirfd, const char *path, int flags, mode_t mode,
                unsigned long long resolve);

/* Component-wise containment of two normalised absolute paths (paths.c). */
int hcp_path_contains(const char *base, const char *path);
/* The start of a small file (a /proc or /sys entry: at most size - 1
 * bytes) into buf, NUL-terminated: the bytes read — 0, and buf "", when it
 * could not be read — or -1 (buf "") when it could not be opened.
 * pathutil.c; no allocation, no stdio: a child may call it. */
ssize_t hcp_read_small(const char *path, char *buf, size_t size);
/* Sends one byte with n descriptors (1..HCP_SEND_FDS_MAX) as one message
 * on a unix socket: 0, or -1 with errno. pathutil.c; no allocation. */
#define HCP_SEND_FDS_MAX 24
int hcp_send_fds(int sock, char byte, const int *fds, int n);
/* Receives one such message (flags for recvmsg; descriptors close-on-exec):
 * the number of descriptors (0..max) with *byte set, -2 at EOF, or -1 with
 * errno (EMSGSIZE: more than max came, none is kept). pathutil.c. */
int hcp_recv_fds(int sock, int flags, char *byte, int *fds, int max);

/* A growing byte buffer that becomes a Lua string without a copy
 * (strbuf.c): allocated through the state's own allocator, with room for a
 * string object's header (head bytes) in front of the bytes. */
struct hcp_strbuf {
    char *block;        /* head + cap + 1 bytes, or NULL */
    size_t head, len, cap;
    lua_Alloc f;        /* the state's allocator, which frees it too */
    void *ud;
};
/* An empty buffer for strings of L's state. */
void hcp_strbuf_init(struct hcp_strbuf *b, lua_State *L);
/* Room for at least one more byte, cap doubled up to max: 0, or -1 when
 * full at max or out of memory (the bytes held stay). */
int hcp_strbuf_grow(struct hcp_strbuf *b, size_t max);
static inline char *hcp_strbuf_data(const struct hcp_strbuf *b)
{
    return b->block + b->head;
}
/* Pushes the bytes as a Lua string (the block itself when it can be,
 * else a copy) and leaves the buffer empty. */
void hcp_strbuf_push(lua_State *L, struct hcp_strbuf *b);
/* Frees the bytes (idempotent). */
void hcp_strbuf_free(struct hcp_strbuf *b);

/* Push nil, "<prefix>: <strerror(err)>", err and return 3 (paths.c).
 * err is passed in because errno must be saved before any Lua call. */
int hcp_push_oserror(lua_State *L, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Opening files the runtime reads (openfile.c). */

/* openat2 beneath dirfd; where the kernel has no openat2, a component walk
 * with O_NOFOLLOW at every step ("..": EXDEV). -1 with errno. */
int hcp_open_beneath(int dirfd, const char *rel, int flags, mode_t mode, uint64_t resolve);

/* Returned by hcp_open_regular when the path is not a regular file (*st
 * says what it is; nothing was opened for reading, nothing blocked). */
#define HCP_NOT_REGULAR (-2)

/* Opens rel (beneath dirfd with these resolve flags, or a plain openat when
 * resolve is 0) for reading, only when it is a regular file: O_PATH first,
 * fstat into *st, then the same inode reopened O_RDONLY. O_NOFOLLOW in
 * flags applies to the final component. Returns the fd, HCP_NOT_REGULAR,
 * or -1 with errno. */
int hcp_open_regular(int dirfd, const char *rel, int flags, uint64_t resolve, struct stat *st);

/* Reopens an O_PATH descriptor through /proc/self/fd (flags plus O_CLOEXEC,
 * O_NOCTTY, and O_NONBLOCK for the open itself), checking the inode is st's.
 * -1 with errno (ENOENT: no /proc). */
int hcp_reopen(int pathfd, const struct stat *st, int flags);

/* "a FIFO", "a socket", "a character device", … for messages. */
const char *hcp_file_type(mode_t m);

/* The kernel's absolute name of what fd refers to, into buf. -1 with errno
 * (ESTALE: deleted, or not reachable from our root). */
int hcp_fd_path(int fd, char *buf, size_t size);

int luaopen_hcp_core(lua_State *L);

#endif
