// Scenarios for the EncryptedDatabase module; see main.swift.
import Foundation

/// Runs one database scenario and returns the process exit status.
func runDatabaseStress(_ arguments: [String]) -> Int32 {
    FileHandle.standardError.write(Data("securestore-stress db: no scenarios yet\n".utf8))
    return 64
}
