// securestore: the command-line tool. The command tree, parser and commands are the SecureStoreCommands
// module; the work is in the library modules.
import Foundation
import SecureStoreCommands

exit(runSecureStoreTool())
