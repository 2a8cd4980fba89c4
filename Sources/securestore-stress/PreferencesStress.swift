// Scenarios for the Preferences module; see main.swift.
import Foundation

/// Runs one preferences scenario and returns the process exit status.
func runPreferencesStress(_ arguments: [String]) -> Int32 {
    FileHandle.standardError.write(Data("securestore-stress prefs: no scenarios yet\n".utf8))
    return 64
}
