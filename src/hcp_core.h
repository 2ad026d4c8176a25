/* hcp_core.h — private interface between the C files of hcp.core.
 * Each file owns one concern and registers its functions into the module
 * table that luaopen_hcp_core leaves on the stack. */
#ifndef HCP_CORE_H
#define HCP_CORE_H

#include <lua.h>
#include <lauxlib.h>
#include <stddef.h>
#include <sys/types.h>

#define HCP_CORE_VERSION "0.1.0"

/* Registration hooks: each adds its functions to the table at the top of L. */
void hcp_register_paths(lua_State *L);
void hcp_register_spawn(lua_State *L);
void hcp_register_fs(lua_State *L);
void hcp_register_jail(lua_State *L);
void hcp_register_isolation(lua_State *L);

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

/* Push nil, "<prefix>: <strerror(err)>", err and return 3 (paths.c).
 * err is passed in because errno must be saved before any Lua call. */
int hcp_push_oserror(lua_State *L, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

int luaopen_hcp_core(lua_State *L);

#endif
