# Writes a C++ source that holds the file IN as a string (the dashboard page, built into the binary).
# cmake -DIN=<file> -DOUT=<source> -DNAME=<symbol> -P embed.cmake
file(READ "${IN}" content)
string(FIND "${content}" ")loch_embed\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter")
endif()
file(WRITE "${OUT}" "// Generated from ${IN} by cmake/embed.cmake.\nnamespace loch::http {\nextern const char ${NAME}[];\nconst char ${NAME}[] = R\"loch_embed(${content})loch_embed\";\n}\n")
