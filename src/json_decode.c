/* json_decode.c — core.json_decode: the fast path of hcp.json.decode.
 *
 * hcp.json's decoder, in Lua, is the reference: strict RFC 8259, and every
 * refusal names the field at fault. This one accepts what that one accepts
 * and returns the same value — the same types (integer or float as Lua's
 * tonumber and math.tointeger make them), the same bytes, the caller's
 * null and array metatable — but says nothing when it refuses: it returns
 * nil, and hcp.json runs the Lua decoder, whose answer (its message) is
 * the result. So a refusal here costs a second decode, never a different
 * result; the one thing this file must never do is accept a text the Lua
 * decoder refuses, or return a value it would not (spec/json_c_spec.lua
 * and the json fuzz target check both).
 *
 * The text is hostile (envelopes from agents, manifests): every read is
 * checked against its length (it may hold NUL bytes), nesting stops at
 * MAX_DEPTH as the Lua decoder's does (two C frames per level), and no
 * input makes it raise (a memory error aside: hcp.json calls it in pcall).
 */
#include "hcp_core.h"

#include <math.h>
#include <string.h>

/* json.lua's MAX_DEPTH: a value at depth > 500 is refused (the text itself
 * is at depth 0, an element or member one deeper than its container). */
#define MAX_DEPTH 500

/* Stack positions of core.json_decode's arguments. */
#define NULL_ARG 2
#define ARRAY_MT_ARG 3

/* Stack slots one level of nesting may use: its table, a key, a duplicate
 * probe, and a scalar being built (a long number token and its value, or a
 * string buffer's box). Checked at every container, so depth cannot
 * overflow the stack. */
#define LEVEL_SLOTS 8

typedef struct {
    lua_State *L;
    const unsigned char *s;
    size_t len;
    size_t pos; /* next byte to read; never beyond len */
} JsonIn;

static int peek(const JsonIn *j)
{
    return j->pos < j->len ? j->s[j->pos] : -1;
}

/* json.lua's D:skip: space, tab, newline, carriage return — nothing else. */
static void skip_ws(JsonIn *j)
{
    while (j->pos < j->len) {
        unsigned char c = j->s[j->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            return;
        j->pos++;
    }
}

static int is_digit(int c)
{
    return c >= '0' && c <= '9';
}

/* ---------------------------------------------------------------------
 * Strings
 * --------------------------------------------------------------------- */

/* Length of the UTF-8 sequence at s[p] (a byte >= 0x80), or 0 when Lua
 * 5.4's utf8.len (lutf8lib.c's utf8_decode, strict) refuses it: a
 * continuation byte as lead, a missing continuation byte, an overlong
 * form, a surrogate, a code point above U+10FFFF. The same algorithm, with
 * the end of the text where Lua reads the substring's terminating NUL. */
static size_t utf8_seq(const unsigned char *s, size_t len, size_t p)
{
    static const uint32_t limits[] = { ~(uint32_t)0, 0x80, 0x800, 0x10000u, 0x200000u, 0x4000000u };
    unsigned c = s[p];
    uint32_t res = 0;
    size_t count = 0;
    for (; c & 0x40; c <<= 1) {
        /* Lua reads a sixth continuation byte, then refuses: the same */
        if (++count > 5 || len - p <= count)
            return 0;
        unsigned cc = s[p + count];
        if ((cc & 0xC0) != 0x80)
            return 0;
        res = (res << 6) | (cc & 0x3F);
    }
    res |= (uint32_t)(c & 0x7F) << (count * 5);
    if (res < limits[count])
        return 0;
    if (res > 0x10FFFFu || (res >= 0xD800u && res <= 0xDFFFu))
        return 0;
    return count + 1;
}

/* Four hex digits at s[p], as json.lua's D:hex4 takes them. */
static int hex4(const unsigned char *s, size_t len, size_t p, unsigned *cp)
{
    if (p > len || len - p < 4)
        return 0;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = s[p + (size_t)i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return 0;
        v = (v << 4) | d;
    }
    *cp = v;
    return 1;
}

/* cp (at most U+10FFFF, no surrogate) as UTF-8, as utf8.char writes it. */
static size_t utf8_put(char *out, unsigned cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A \u escape whose "u" is at s[p] (json.lua's D:unicode): a surrogate pair
 * is joined, a lone surrogate refused. Writes the UTF-8 into out, its
 * length into *n; returns the position after the escape, 0 to refuse. */
static size_t unicode_escape(const unsigned char *s, size_t len, size_t p, char *out, size_t *n)
{
    unsigned cp, lo;
    size_t q = p + 5;
    if (!hex4(s, len, p + 1, &cp) || (cp >= 0xDC00 && cp <= 0xDFFF))
        return 0;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (len - q < 2 || s[q] != '\\' || s[q + 1] != 'u' || !hex4(s, len, q + 2, &lo)
            || lo < 0xDC00 || lo > 0xDFFF)
            return 0;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        q += 6;
    }
    *n = utf8_put(out, cp);
    return q;
}

/* The escape after a backslash, at s[p]: its bytes into out (at most 4),
 * their count into *n; returns the position after it, 0 to refuse. */
static size_t escape(const unsigned char *s, size_t len, size_t p, char *out, size_t *n)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    if (p >= len)
        return 0;
    if (s[p] == 'u')
        return unicode_escape(s, len, p, out, n);
    const char *e = s[p] ? strchr(from, s[p]) : NULL;
    if (!e)
        return 0;
    out[0] = to[e - from];
    *n = 1;
    return p + 1;
}

/* Whether any byte of the 8 in x needs a look: a control byte, '"', '\\',
 * or not ASCII. Each test may also flag a byte beyond the first one that
 * matches (a borrow), never miss one: a flagged word goes byte by byte. */
static int word_special(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101u, high = 0x8080808080808080u;
    uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
    uint64_t ctl = (x - ones * 0x20) & ~x;
    uint64_t quote = (q - ones) & ~q, bslash = (b - ones) & ~b;
    return ((ctl | quote | bslash | x) & high) != 0;
}

/* The end of the run of printable ASCII other than '"' and '\\' that
 * starts at s[p]: what a string copies as it is. Eight bytes at a time
 * while they are plain (strings are most of a text), then one by one. */
static size_t plain_end(const unsigned char *s, size_t len, size_t p)
{
    uint64_t x;
    while (len - p >= 8) {
        memcpy(&x, s + p, 8);
        if (word_special(x))
            break;
        p += 8;
    }
    while (p < len && s[p] >= 0x20 && s[p] < 0x80 && s[p] != '"' && s[p] != '\\')
        p++;
    return p;
}

/* Reads the string that starts at j->pos (just after its opening quote):
 * *n gets its decoded length, *end the position after its closing quote.
 * With out, writes the decoded bytes there (*n of them: the caller has
 * measured first). 0 when json.lua's D:string refuses it: no closing
 * quote, a raw control byte, a bad escape, invalid UTF-8. */
static int scan_string(const JsonIn *j, char *out, size_t *n, size_t *end)
{
    const unsigned char *s = j->s;
    size_t len = j->len, p = j->pos, k = 0;
    for (;;) {
        size_t run = p;
        p = plain_end(s, len, p);
        if (out)
            memcpy(out + k, s + run, p - run);
        k += p - run;
        if (p >= len)
            return 0; /* no closing quote */
        unsigned char c = s[p];
        size_t step;
        char esc[4];
        if (c == '"') {
            *n = k;
            *end = p + 1;
            return 1;
        }
        if (c < 0x20)
            return 0;
        if (c == '\\') {
            size_t q = escape(s, len, p + 1, esc, &step);
            if (!q)
                return 0;
            if (out)
                memcpy(out + k, esc, step);
            k += step;
            p = q;
            continue;
        }
        step = utf8_seq(s, len, p);
        if (!step)
            return 0;
        if (out)
            memcpy(out + k, s + p, step);
        k += step;
        p += step;
    }
}

/* Pushes the string at j->pos. One pass when it has no escape (the common
 * case: the bytes are pushed as they are); otherwise a second pass writes
 * the decoded bytes into a buffer of the measured size, so no allocation
 * is left half-done by a refusal. Every escape is shorter than what it
 * stands for, so "decoded length < span" means "has an escape". Never
 * inlined: its luaL_Buffer (1 KiB) stays out of the recursive frames. */
__attribute__((noinline)) static int push_string(JsonIn *j)
{
    size_t n, end;
    if (!scan_string(j, NULL, &n, &end))
        return 0;
    if (n == end - 1 - j->pos) {
        lua_pushlstring(j->L, (const char *)j->s + j->pos, n);
    } else {
        luaL_Buffer b;
        char *out = luaL_buffinitsize(j->L, &b, n);
        scan_string(j, out, &n, &end);
        luaL_pushresultsize(&b, n);
    }
    j->pos = end;
    return 1;
}

/* ---------------------------------------------------------------------
 * Numbers and literals
 * --------------------------------------------------------------------- */

/* A byte of the token json.lua's D:number cuts ([-+%w.]+): the number must
 * end where that token does ("1x", "1.5.3", "1-2" are refused). */
static int in_token(int c)
{
    int lower = c | 0x20;
    return is_digit(c) || (lower >= 'a' && lower <= 'z') || c == '-' || c == '+' || c == '.';
}

static size_t skip_digits(const JsonIn *j, size_t p)
{
    while (p < j->len && is_digit(j->s[p]))
        p++;
    return p;
}

/* End of the JSON number at j->pos (-?(0|[1-9]d*)(.d+)?([eE][-+]?d+)?), 0
 * when there is none; *integral: it has neither fraction nor exponent. */
static size_t number_end(const JsonIn *j, int *integral)
{
    const unsigned char *s = j->s;
    size_t len = j->len, p = j->pos;
    *integral = 1;
    if (p < len && s[p] == '-')
        p++;
    if (p < len && s[p] == '0')
        p++;
    else if (p < len && s[p] >= '1' && s[p] <= '9')
        p = skip_digits(j, p);
    else
        return 0;
    if (p < len && s[p] == '.') {
        if (len - p < 2 || !is_digit(s[p + 1]))
            return 0;
        p = skip_digits(j, p + 1);
        *integral = 0;
    }
    if (p < len && (s[p] == 'e' || s[p] == 'E')) {
        p++;
        if (p < len && (s[p] == '+' || s[p] == '-'))
            p++;
        if (p >= len || !is_digit(s[p]))
            return 0;
        p = skip_digits(j, p);
        *integral = 0;
    }
    if (p < len && in_token(s[p]))
        return 0;
    return p;
}

/* Pushes the number at j->pos exactly as D:number makes it: Lua's own
 * conversion of the token (tonumber is lua_stringtonumber), an infinity
 * refused, and a token without fraction or exponent that Lua reads as a
 * float (too big for an integer) given math.tointeger's integer when
 * there is one. Never inlined, like push_string. */
__attribute__((noinline)) static int push_number(JsonIn *j)
{
    lua_State *L = j->L;
    int integral;
    size_t end = number_end(j, &integral);
    if (!end)
        return 0;
    size_t n = end - j->pos, got;
    const char *tok = (const char *)j->s + j->pos;
    char buf[64];
    if (n < sizeof buf) {
        memcpy(buf, tok, n);
        buf[n] = '\0';
        got = lua_stringtonumber(L, buf);
    } else {
        /* a NUL-terminated copy for Lua to read (the text goes on after it) */
        lua_pushlstring(L, tok, n);
        got = lua_stringtonumber(L, lua_tostring(L, -1));
        if (got)
            lua_remove(L, -2);
    }
    if (got != n + 1)
        return 0;
    if (!lua_isinteger(L, -1)) {
        lua_Number v = lua_tonumber(L, -1);
        int exact = 0;
        if (v == HUGE_VAL || v == -HUGE_VAL)
            return 0;
        lua_Integer i = integral ? lua_tointegerx(L, -1, &exact) : 0;
        if (integral && exact) {
            lua_pop(L, 1);
            lua_pushinteger(L, i);
        }
    }
    j->pos = end;
    return 1;
}

/* true, false or null at j->pos. What follows is not looked at: in a text
 * this decoder accepts, a value is followed by whitespace, ",", "]", "}"
 * or the end, never by the [%w_] that would make D:value read a longer word. */
static int match_word(JsonIn *j, const char *w, size_t n)
{
    if (j->len - j->pos < n || memcmp(j->s + j->pos, w, n) != 0)
        return 0;
    j->pos += n;
    return 1;
}

/* ---------------------------------------------------------------------
 * Values
 * --------------------------------------------------------------------- */

static int push_value(JsonIn *j, int depth);

/* Containers are read onto the stack first (the elements, or key and
 * value of each member) and made into a table of the right size at the
 * end: filling a table as it grows rehashes it at every power of two,
 * which cost more than the whole scan. A text too big for the stack
 * (LUAI_MAXSTACK) is left to the Lua decoder. */

/* The elements on the stack above base, into an array. */
static void make_array(lua_State *L, int base)
{
    int n = lua_gettop(L) - base;
    lua_createtable(L, n, 0);
    lua_pushvalue(L, ARRAY_MT_ARG);
    lua_setmetatable(L, -2);
    for (int i = 1; i <= n; i++) {
        lua_pushvalue(L, base + i);
        lua_rawseti(L, -2, i);
    }
    if (n > 0) {
        lua_replace(L, base + 1);
        lua_settop(L, base + 1);
    }
}

/* The key-value pairs on the stack above base, into a table; 0 when a key
 * comes twice. No value is nil (null is the caller's null), so a key
 * already in the table is a duplicate. */
static int make_object(lua_State *L, int base)
{
    int n = (lua_gettop(L) - base) / 2;
    lua_createtable(L, 0, n);
    for (int i = 0; i < n; i++) {
        int k = base + 1 + 2 * i;
        if (lua_rawget(L, (lua_pushvalue(L, k), -2)) != LUA_TNIL)
            return 0;
        lua_pop(L, 1);
        lua_pushvalue(L, k);
        lua_pushvalue(L, k + 1);
        lua_rawset(L, -3);
    }
    if (n > 0) {
        lua_replace(L, base + 1);
        lua_settop(L, base + 1);
    }
    return 1;
}

/* An array whose "[" was just read; elements one level deeper (D:array). */
static int push_array(JsonIn *j, int depth)
{
    lua_State *L = j->L;
    int base = lua_gettop(L);
    skip_ws(j);
    if (peek(j) == ']') {
        j->pos++;
        make_array(L, base);
        return 1;
    }
    for (;;) {
        if (!lua_checkstack(L, LEVEL_SLOTS) || !push_value(j, depth + 1))
            return 0;
        skip_ws(j);
        int c = peek(j);
        if (c != ',' && c != ']')
            return 0;
        j->pos++;
        if (c == ']') {
            make_array(L, base);
            return 1;
        }
    }
}

/* An object whose "{" was just read: a plain table, members one level
 * deeper (D:object). */
static int push_object(JsonIn *j, int depth)
{
    lua_State *L = j->L;
    int base = lua_gettop(L);
    skip_ws(j);
    if (peek(j) == '}') {
        j->pos++;
        return make_object(L, base);
    }
    for (;;) {
        if (!lua_checkstack(L, LEVEL_SLOTS) || peek(j) != '"')
            return 0;
        j->pos++;
        if (!push_string(j))
            return 0;
        skip_ws(j);
        if (peek(j) != ':')
            return 0;
        j->pos++;
        if (!push_value(j, depth + 1))
            return 0;
        skip_ws(j);
        int c = peek(j);
        if (c != ',' && c != '}')
            return 0;
        j->pos++;
        if (c == '}')
            return make_object(L, base);
        skip_ws(j);
    }
}

/* The value at j->pos (after whitespace), pushed; 0 to refuse, with
 * whatever was pushed left for the caller to drop (D:value). */
static int push_value(JsonIn *j, int depth)
{
    if (depth > MAX_DEPTH)
        return 0;
    skip_ws(j);
    switch (peek(j)) {
    case '{':
        j->pos++;
        return push_object(j, depth);
    case '[':
        j->pos++;
        return push_array(j, depth);
    case '"':
        j->pos++;
        return push_string(j);
    case 't':
        if (!match_word(j, "true", 4))
            return 0;
        lua_pushboolean(j->L, 1);
        return 1;
    case 'f':
        if (!match_word(j, "false", 5))
            return 0;
        lua_pushboolean(j->L, 0);
        return 1;
    case 'n':
        if (!match_word(j, "null", 4))
            return 0;
        lua_pushvalue(j->L, NULL_ARG);
        return 1;
    default:
        return push_number(j);
    }
}

/* core.json_decode(text, null, array_mt) -> the value of the JSON text, or
 * nil when hcp.json's Lua decoder might refuse it (then that decoder says
 * why). JSON null decodes to `null`, every array gets `array_mt`. Raises
 * only for arguments of the wrong type. */
static int l_json_decode(lua_State *L)
{
    JsonIn j = { .L = L };
    luaL_checktype(L, 1, LUA_TSTRING);
    luaL_checkany(L, NULL_ARG);
    luaL_checktype(L, ARRAY_MT_ARG, LUA_TTABLE);
    lua_settop(L, ARRAY_MT_ARG);
    j.s = (const unsigned char *)lua_tolstring(L, 1, &j.len);
    if (push_value(&j, 0)) {
        skip_ws(&j);
        if (j.pos == j.len)
            return 1;
    }
    /* a refusal leaves what it had built on the stack: Lua drops it */
    lua_pushnil(L);
    return 1;
}

static const luaL_Reg json_funcs[] = {
    { "json_decode", l_json_decode },
    { NULL, NULL },
};

/* core.null: JSON null as lua-cjson spells it, a light userdata holding
 * NULL (equal to cjson.null: light userdata compare by address), so hcp.json
 * need not load cjson for it. */
void hcp_register_json(lua_State *L)
{
    luaL_setfuncs(L, json_funcs, 0);
    lua_pushlightuserdata(L, NULL);
    lua_setfield(L, -2, "null");
}
