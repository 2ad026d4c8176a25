/* hcp_lua.h — private interface between the two C files of the hcp-lua
 * executable: hcp_lua.c (main, options, scripts, hcp / hcpx) and repl.c (the
 * interactive REPL). Not part of hcp.core: core.so must not link readline.
 * The names carry a prefix because hcp-lua is linked with -rdynamic, so they
 * are visible to every C module that require loads. */
#ifndef HCP_LUA_H
#define HCP_LUA_H

#include <stddef.h>
#include <lua.h>

/* Prefix of error messages ("hcp-lua", "hcp", "hcpx"); NULL in the REPL,
 * where messages have no prefix. */
extern const char *hcp_lua_progname;

/* Prints the error message on the stack (if any) and pops it; returns status. */
int hcp_lua_report(lua_State *L, int status);

/* lua_pcall with a traceback handler, Ctrl-C turned into a Lua error. */
int hcp_lua_docall(lua_State *L, int narg, int nres);

/* Installs handler for SIGINT with sa_flags flags. */
void hcp_lua_set_sigint(void (*handler)(int), int flags);

/* hcp and hcpx load their Lua modules compiled, from a cache only our uid
 * may write (luac_cache.c). */
void hcp_luac_install(lua_State *L);

/* The chunk lua_dump wrote (in, len) without its local variables' names,
 * into out (len bytes are enough): the copy's length, or 0 where the chunk
 * is not what this Lua writes (luac_trim.c). */
size_t hcp_luac_trim(const unsigned char *in, size_t len, unsigned char *out);

/* Before the first malloc: the heap's first megabyte populated at once
 * (unless HCP_HEAP_POPULATE=0), or with HCP_HUGE_HEAP=1 the heap on a
 * transparent huge page where the kernel has them (heap.c). */
void hcp_heap_prepare(void);

/* The interactive loop (repl.c): reads, runs and prints until EOF. */
void hcp_lua_repl(lua_State *L);

#endif
