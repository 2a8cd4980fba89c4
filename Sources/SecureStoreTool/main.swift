// securestore: the command-line tool. The command tree, parser and commands are the SecureStoreCommands
// module; the work is in the library modules.
internal import Foundation
internal import SecureStoreCommands

exit(runSecureStoreTool())
