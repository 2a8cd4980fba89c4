// Scenarios for the Keychain module; see main.swift. They run in a separate process so that a test
// can give them an environment of their own (no session bus, a bus with no Secret Service).
import Foundation
import Keychain

/// Runs one keychain scenario and returns the process exit status.
///
/// - `get SERVICE ACCOUNT`: prints the secret, or nothing when absent.
/// - `set SERVICE ACCOUNT`: stores standard input.
/// On a KeychainError prints `error <code>: <message>` on standard error and exits 1.
func runKeychainStress(_ arguments: [String]) -> Int32 {
    guard arguments.count == 3 else {
        FileHandle.standardError.write(Data("usage: securestore-stress keychain get|set SERVICE ACCOUNT\n".utf8))
        return 64
    }
    let keychain = Keychain()
    do {
        switch arguments[0] {
        case "get":
            if let data = try keychain.data(service: arguments[1], account: arguments[2]) {
                FileHandle.standardOutput.write(data)
            }
        case "set":
            let input = FileHandle.standardInput.readDataToEndOfFile()
            try keychain.set(input, service: arguments[1], account: arguments[2])
        default:
            FileHandle.standardError.write(Data("securestore-stress keychain: unknown scenario\n".utf8))
            return 64
        }
        return 0
    } catch {
        FileHandle.standardError.write(Data("error \(error.code): \(error.message)\n".utf8))
        return 1
    }
}
