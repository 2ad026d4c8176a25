-- luacheck configuration: Lua 5.4 everywhere; busted globals in specs.
std = "lua54"
max_line_length = 140
files["spec/"] = { std = "+busted" }
exclude_files = { "build/", "build-asan/", "build-fuzz/" }
