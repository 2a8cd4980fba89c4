// securestore: the command-line tool. Parsing and printing only; the work is in the SecureStore module.
print("securestore: not yet")
