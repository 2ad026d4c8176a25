/* luac_trim.c — the compiled-module cache's chunks without the names of
 * local variables (issue 12). Loading a chunk interns every string in it;
 * in hcp's modules most of them are the names of locals, kept only for
 * debug.getlocal and for error messages such as "(local 'x')". Without
 * them the modules of `hcp run` load faster (0.64 -> 0.46 ms in a warm
 * loop; stripped of everything, 0.40) and take less memory. Everything else stays: the source
 * name and line information (tracebacks and error positions are the
 * same), the upvalue names, the code and constants.
 *
 * The chunk is the one lua_dump just wrote, in Lua 5.4's format (ldump.c):
 * a header, then each function's source, lines defined, parameters, code,
 * constants, upvalues, nested functions, and debug information — line
 * info, absolute line info, local variables, upvalue names. Sizes are
 * written 7 bits a byte, most significant first, the last byte's high bit
 * set. The copy is the same bytes with each function's local-variable list
 * written as empty. Anything unexpected (another format, a size that runs
 * past the end, bytes left over) and the trim refuses: the caller keeps
 * the chunk as dumped. */
#include "hcp_lua.h"

#include <stdint.h>
#include <string.h>

#define HEADER_SIZE 31   /* signature 4, version, format, data 6, sizes 3, an integer, a float */
#define MAX_DEPTH 200    /* LUAI_MAXCCALLS: no chunk of the parser nests deeper */

struct chunk {
    const unsigned char *p, *end;
    unsigned char *o;   /* the copy: what each step keeps is written here */
    int bad;
};

static void copy(struct chunk *c, size_t n, int keep)
{
    if (c->bad || (size_t)(c->end - c->p) < n) {
        c->bad = 1;
        return;
    }
    if (keep) {
        memcpy(c->o, c->p, n);
        c->o += n;
    }
    c->p += n;
}

static size_t size_field(struct chunk *c, int keep)
{
    size_t x = 0;
    const unsigned char *start = c->p;
    for (;;) {
        if (c->bad || c->p >= c->end || x > (SIZE_MAX >> 8)) {
            c->bad = 1;
            return 0;
        }
        unsigned char b = *c->p++;
        x = (x << 7) | (b & 0x7f);
        if (b & 0x80)
            break;
    }
    if (keep) {
        memcpy(c->o, start, (size_t)(c->p - start));
        c->o += c->p - start;
    }
    return x;
}

static void string_field(struct chunk *c, int keep)
{
    size_t n = size_field(c, keep);   /* length + 1; 0: no string */
    if (n > 0)
        copy(c, n - 1, keep);
}

/* A count of items of at least `each` bytes that fits in what is left. */
static size_t count(struct chunk *c, size_t each, int keep)
{
    size_t n = size_field(c, keep);
    if (!c->bad && n > (size_t)(c->end - c->p) / each)
        c->bad = 1;
    return c->bad ? 0 : n;
}

static void constants(struct chunk *c)
{
    size_t n = count(c, 1, 1);
    for (size_t i = 0; i < n && !c->bad; i++) {
        unsigned char tag = c->p < c->end ? *c->p : 0xff;
        copy(c, 1, 1);
        switch (tag) {
        case 0x00: case 0x01: case 0x11:   /* nil, false, true */
            break;
        case 0x03: case 0x13:              /* integer, float */
            copy(c, 8, 1);
            break;
        case 0x04: case 0x14:              /* short, long string */
            string_field(c, 1);
            break;
        default:
            c->bad = 1;
        }
    }
}

static void function(struct chunk *c, int depth)
{
    if (depth > MAX_DEPTH) {
        c->bad = 1;
        return;
    }
    string_field(c, 1);                 /* source */
    size_field(c, 1);                   /* linedefined */
    size_field(c, 1);                   /* lastlinedefined */
    copy(c, 3, 1);                      /* numparams, is_vararg, maxstacksize */
    copy(c, count(c, 4, 1) * 4, 1);     /* code */
    constants(c);
    copy(c, count(c, 3, 1) * 3, 1);     /* upvalues: instack, idx, kind */
    size_t n = count(c, 1, 1);          /* nested functions */
    for (size_t i = 0; i < n && !c->bad; i++)
        function(c, depth + 1);
    copy(c, count(c, 1, 1), 1);         /* line info */
    n = count(c, 2, 1);                 /* absolute line info: pc, line */
    for (size_t i = 0; i < n && !c->bad; i++) {
        size_field(c, 1);
        size_field(c, 1);
    }
    n = count(c, 3, 0);                 /* local variables: name, startpc, endpc */
    if (!c->bad)
        *c->o++ = 0x80;                 /* written as none */
    for (size_t i = 0; i < n && !c->bad; i++) {
        string_field(c, 0);
        size_field(c, 0);
        size_field(c, 0);
    }
    n = count(c, 1, 1);                 /* upvalue names */
    for (size_t i = 0; i < n && !c->bad; i++)
        string_field(c, 1);
}

size_t hcp_luac_trim(const unsigned char *in, size_t len, unsigned char *out)
{
    static const unsigned char head[] = { 0x1b, 'L', 'u', 'a', 0x54, 0, 0x19, 0x93, '\r', '\n', 0x1a, '\n',
                                          4, sizeof(lua_Integer), sizeof(lua_Number) };
    if (len < HEADER_SIZE + 1 || memcmp(in, head, sizeof head) != 0 || sizeof(lua_Integer) != 8 ||
        sizeof(lua_Number) != 8)
        return 0;
    struct chunk c = { in, in + len, out, 0 };
    copy(&c, HEADER_SIZE + 1, 1);       /* and the main function's upvalue count */
    function(&c, 0);
    return c.bad || c.p != c.end ? 0 : (size_t)(c.o - out);
}
