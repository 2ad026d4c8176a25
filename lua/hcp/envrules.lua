--- Environment variables that make a program load code (or run a command)
--- the allow-list never saw: a manifest may not set them through
--- `agent_env`, a binding's `env` or `home_env` (contract §8). Matching is
--- case-insensitive: some runtimes fold case, and `ld_preload` is nobody's
--- honest variable name.
---
--- The list starts from glibc's own (`sysdeps/generic/unsecvars.h`, the
--- variables ld.so drops for setuid programs) and adds, family by family,
--- what the interpreters and common tools read at start-up. Each entry says
--- why; `M.list()` gives the whole table for the docs (docs/security.md).
--- Deliberately not on it: `TMPDIR` (in glibc's list, but it names where
--- files go, not code — and the runtime sets it), `HOME` and `XDG_*` (a
--- pack points them at the jail with `home_env`).
---@class hcp.envrules
local M = {}

local LOADER = "is refused: it makes the dynamic loader or libc load code or files it names"
local SHELL = "is refused: a shell runs the file or code it names at start-up"
local COMMAND = "is refused: programs run the command it names"
local GIT = "is refused: git runs commands or reads configuration it names"
local INTERP = "is refused: the interpreter loads code from what it names"
local PLUGIN = "is refused: a library loads plugins (shared objects) from what it names"
local BUILD = "is refused: build tools run programs or read makefiles it names"

-- Exact names (upper case).
local EXACT = {}
local function add(reason, names)
  for name in names:gmatch("%S+") do EXACT[name] = reason end
end

-- glibc's unsecvars, less TMPDIR
add(LOADER, "GCONV_PATH GETCONF_DIR GLIBC_TUNABLES HOSTALIASES LOCALDOMAIN LOCPATH MALLOC_TRACE NIS_PATH "
  .. "NLSPATH RESOLV_HOST_CONF RES_OPTIONS TZDIR")
add(SHELL, "BASH_ENV ENV SHELLOPTS BASHOPTS PS4 PROMPT_COMMAND BASH_LOADABLES_PATH ZDOTDIR FPATH")
add(COMMAND, "SHELL EDITOR VISUAL PAGER MANPAGER LESSOPEN LESSCLOSE BROWSER SSH_ASKPASS SUDO_ASKPASS")
add(GIT, "GIT_ASKPASS GIT_EXEC_PATH GIT_EDITOR GIT_SEQUENCE_EDITOR GIT_PAGER GIT_EXTERNAL_DIFF "
  .. "GIT_PROXY_COMMAND GIT_TEMPLATE_DIR")
add(INTERP, "PERLLIB PERLIO RUBYOPT RUBYLIB RUBYPATH RUBYSHELL GEM_HOME GEM_PATH BUNDLE_GEMFILE "
  .. "NODE_OPTIONS NODE_PATH NODE_REPL_EXTERNAL_MODULE "
  .. "JAVA_TOOL_OPTIONS _JAVA_OPTIONS JDK_JAVA_OPTIONS JAVA_OPTS CLASSPATH "
  .. "TCLLIBPATH TCL_LIBRARY TK_LIBRARY R_PROFILE R_PROFILE_USER R_ENVIRON R_ENVIRON_USER R_LIBS R_LIBS_USER "
  .. "R_LIBS_SITE PHPRC PHP_INI_SCAN_DIR GUILE_LOAD_PATH GUILE_LOAD_COMPILED_PATH ERL_LIBS ERL_AFLAGS "
  .. "ERL_ZFLAGS ERL_FLAGS ELIXIR_ERL_OPTIONS DOTNET_STARTUP_HOOKS DOTNET_ADDITIONAL_DEPS COR_PROFILER "
  .. "COR_PROFILER_PATH CORECLR_PROFILER CORECLR_PROFILER_PATH")
add(PLUGIN, "OPENSSL_CONF OPENSSL_ENGINES OPENSSL_MODULES SASL_PATH KRB5_CONFIG GTK_MODULES GTK3_MODULES "
  .. "GTK_PATH QT_PLUGIN_PATH QT_QPA_PLATFORM_PLUGIN_PATH GIO_EXTRA_MODULES GST_PLUGIN_PATH "
  .. "GST_PLUGIN_SYSTEM_PATH GDK_PIXBUF_MODULE_FILE LIBGL_DRIVERS_PATH VK_ICD_FILENAMES VK_LAYER_PATH "
  .. "__EGL_VENDOR_LIBRARY_FILENAMES")
add(BUILD, "GOFLAGS MAKEFLAGS MFLAGS GNUMAKEFLAGS MAKEFILES GCC_EXEC_PREFIX COMPILER_PATH")

-- Families by prefix: every name that starts so, except the listed
-- harmless ones (tuning and encoding switches that load nothing).
local FAMILIES = {
  { prefix = "LD_", reason = "is refused: LD_* variables are loader injection" },
  { prefix = "DYLD_", reason = "is refused: DYLD_* variables are loader injection (macOS)" },
  { prefix = "BASH_FUNC_", reason = "is refused: bash imports it as a function" },
  { prefix = "GIT_SSH", reason = GIT },
  -- GIT_CONFIG_NOSYSTEM only turns the system file off
  { prefix = "GIT_CONFIG", reason = GIT, except = "GIT_CONFIG_NOSYSTEM" },
  { prefix = "NPM_CONFIG_", reason = "is refused: npm configuration can run scripts and choose what it installs" },
  { prefix = "LUA_INIT", reason = INTERP },
  { prefix = "LUA_PATH", reason = INTERP },
  { prefix = "LUA_CPATH", reason = INTERP },
  { prefix = "PERL5", reason = INTERP },
  { prefix = "PERL_", reason = INTERP, except = "PERL_UNICODE PERL_HASH_SEED PERL_PERTURB_KEYS PERL_BADLANG" },
  { prefix = "PYTHON", reason = INTERP, except = "PYTHONUNBUFFERED PYTHONIOENCODING PYTHONDONTWRITEBYTECODE "
    .. "PYTHONHASHSEED PYTHONUTF8 PYTHONNOUSERSITE PYTHONSAFEPATH PYTHONOPTIMIZE PYTHONFAULTHANDLER "
    .. "PYTHONCOERCECLOCALE PYTHONDEVMODE PYTHONWARNDEFAULTENCODING PYTHONNODEBUGRANGES PYTHONINTMAXSTRDIGITS "
    .. "PYTHONTRACEMALLOC PYTHONMALLOC PYTHONMALLOCSTATS PYTHONVERBOSE PYTHONDEBUG" },
}
for _, f in ipairs(FAMILIES) do
  local set = {}
  for name in (f.except or ""):gmatch("%S+") do set[name] = true end
  f.except = set
end

--- Why a manifest may not set `name` (to `value`), or nil when it may. A
--- value of "" or "/dev/null" is allowed for any of them: it names nothing
--- to load (the git example sets `GIT_CONFIG_GLOBAL=/dev/null` to read no
--- configuration). Without a value (a binding's token, home_env's jail)
--- the name alone decides.
---@param name string
---@param value string?
---@return string? reason
function M.reason(name, value)
  if value == "" or value == "/dev/null" then return nil end
  local up = name:upper()
  if EXACT[up] then return EXACT[up] end
  for _, f in ipairs(FAMILIES) do
    if up:sub(1, #f.prefix) == f.prefix and not f.except[up] then return f.reason end
  end
  return nil
end

--- The whole list, for documentation: exact names and families.
---@return { names: string[], families: { prefix: string, except: string[] }[] }
function M.list()
  local names, families = {}, {}
  for name in pairs(EXACT) do names[#names + 1] = name end
  table.sort(names)
  for _, f in ipairs(FAMILIES) do
    local except = {}
    for name in pairs(f.except) do except[#except + 1] = name end
    table.sort(except)
    families[#families + 1] = { prefix = f.prefix, except = except }
  end
  return { names = names, families = families }
end

return M
