// Scenarios for the Preferences module; see main.swift.
//
//   securestore-stress prefs hammer DIR DOMAIN
//       Saves forever: each save sets "counter" to one more than the file holds and rewrites one of eight
//       10–40 KiB "blob-N" values, so a save takes long enough to be killed in the middle. Prints "ready"
//       after the first save. The kill -9 test reads the file after each kill.
//   securestore-stress prefs writer DIR DOMAIN PREFIX COUNT
//       Sets PREFIX-0 … PREFIX-(COUNT-1) to 0 … COUNT-1, one set each, and exits 0.
//   securestore-stress prefs load DIR DOMAIN
//       Opens the domain and prints the number of keys and the microseconds the open took (benchmarks).
//   securestore-stress prefs set DIR DOMAIN KEY
//       Opens the domain, sets KEY to a string, and prints the microseconds the set took (fsyncs included).
//   securestore-stress prefs fill DIR DOMAIN BYTES | ud-fill SUITE BYTES
//       Writes a settings-like domain of about BYTES bytes, with Preferences or with Foundation's UserDefaults.
//   securestore-stress prefs ud-load SUITE | ud-set SUITE KEY
//       The UserDefaults counterparts of load and set, for the comparison in Docs/preferences.md.
import Foundation
import Preferences

/// Runs one preferences scenario and returns the process exit status.
func runPreferencesStress(_ arguments: [String]) -> Int32 {
    do {
        switch (arguments.first, arguments.count) {
        case ("hammer", 3):
            return try hammer(location(arguments[1], arguments[2]))
        case ("writer", 5):
            guard let count = Int(arguments[4]) else { return usage() }
            let prefs = try Preferences(location: location(arguments[1], arguments[2]))
            for index in 0..<count { try prefs.set(index, forKey: "\(arguments[3])-\(index)") }
            return 0
        case ("load", 3):
            let start = DispatchTime.now().uptimeNanoseconds
            let prefs = try Preferences(location: location(arguments[1], arguments[2]))
            let keyCount = prefs.keys.count
            let micros = (DispatchTime.now().uptimeNanoseconds - start) / 1000
            print("keys \(keyCount) open-us \(micros)")
            return 0
        case ("set", 4):
            let prefs = try Preferences(location: location(arguments[1], arguments[2]))
            _ = prefs.value(forKey: arguments[3])
            let start = DispatchTime.now().uptimeNanoseconds
            try prefs.set("value-\(start)", forKey: arguments[3])
            let micros = (DispatchTime.now().uptimeNanoseconds - start) / 1000
            print("set-us \(micros)")
            return 0
        case ("fill", 4):
            // A realistic domain of about BYTES bytes: strings, numbers, flags, lists, small dictionaries.
            guard let bytes = Int(arguments[3]) else { return usage() }
            let limits = PreferencesLimits(maxValueSize: 1 << 20, softTotalSize: 8 << 20, hardTotalSize: 16 << 20)
            let prefs = try Preferences(location: location(arguments[1], arguments[2]), limits: limits)
            try prefs.update { values in
                for (key, value) in sampleDomain(bytes: bytes) { values[key] = try PreferenceValue(converting: value) }
            }
            print("keys \(prefs.keys.count) total \(prefs.usage.totalSize)")
            return 0
        case ("ud-fill", 3):
            guard let bytes = Int(arguments[2]), let defaults = UserDefaults(suiteName: arguments[1]) else { return usage() }
            for (key, value) in sampleDomain(bytes: bytes) { defaults.set(value, forKey: key) }
            defaults.synchronize()
            return 0
        case ("ud-load", 2):
            let start = DispatchTime.now().uptimeNanoseconds
            guard let defaults = UserDefaults(suiteName: arguments[1]) else { return usage() }
            let keyCount = defaults.dictionaryRepresentation().count
            let micros = (DispatchTime.now().uptimeNanoseconds - start) / 1000
            print("keys \(keyCount) open-us \(micros)")
            return 0
        case ("ud-set", 3):
            guard let defaults = UserDefaults(suiteName: arguments[1]) else { return usage() }
            _ = defaults.object(forKey: arguments[2])
            let start = DispatchTime.now().uptimeNanoseconds
            defaults.set("value-\(start)", forKey: arguments[2])
            defaults.synchronize()
            let micros = (DispatchTime.now().uptimeNanoseconds - start) / 1000
            print("set-us \(micros)")
            return 0
        default:
            return usage()
        }
    } catch {
        FileHandle.standardError.write(Data("securestore-stress prefs: \(error)\n".utf8))
        return 1
    }
}

/// Settings-like values adding up to about `bytes` bytes of compact JSON.
private func sampleDomain(bytes: Int) -> [(String, Any)] {
    var result: [(String, Any)] = []
    var total = 0
    var index = 0
    while total < bytes {
        let key = "setting.\(index)"
        let value: Any
        switch index % 5 {
        case 0: value = "A sentence of settings text number \(index), with some words in it."
        case 1: value = index * 7919
        case 2: value = Double(index) / 3
        case 3: value = ["recent-\(index)", "recent-\(index + 1)", "recent-\(index + 2)"]
        default: value = ["width": index, "height": index * 2, "visible": index % 2 == 0] as [String: Any]
        }
        result.append((key, value))
        total += key.utf8.count + 40
        index += 1
    }
    return result
}

private func usage() -> Int32 {
    FileHandle.standardError.write(
        Data(
            ("usage: securestore-stress prefs hammer DIR DOMAIN | writer DIR DOMAIN PREFIX COUNT"
                + " | load DIR DOMAIN | set DIR DOMAIN KEY | fill DIR DOMAIN BYTES"
                + " | ud-fill SUITE BYTES | ud-load SUITE | ud-set SUITE KEY\n").utf8))
    return 64
}

private func location(_ directory: String, _ domain: String) throws -> PreferencesLocation {
    try PreferencesLocation(directory: URL(filePath: directory, directoryHint: .isDirectory), domain: domain)
}

private func hammer(_ location: PreferencesLocation) throws -> Int32 {
    let limits = PreferencesLimits(maxValueSize: 64 * 1024, softTotalSize: 1024 * 1024, hardTotalSize: 2 * 1024 * 1024)
    let prefs = try Preferences(location: location, limits: limits)
    // Blobs made once, so that most of each loop is the save itself.
    let blobs = (0..<10).map { digit in
        (0..<4).map { _ in String(repeating: Character(String(digit)), count: Int.random(in: 10_000...40_000)) }
    }
    var first = true
    while true {
        try prefs.update { values in
            var counter = 0
            if case .int(let stored)? = values["counter"] { counter = stored }
            counter += 1
            values["counter"] = .int(counter)
            values["blob-\(counter % 8)"] = .string(blobs[counter % 10].randomElement()!)
        }
        if first {
            first = false
            FileHandle.standardOutput.write(Data("ready\n".utf8))
        }
    }
}
