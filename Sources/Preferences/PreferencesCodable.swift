// Codable values in preferences, a readable PreferenceValue, and changes as an AsyncSequence.
public import Foundation

extension Preferences {
    /// Stores any `Encodable` value for `key`, within the same limits as every value: it is encoded to JSON
    /// and kept as the preference value that JSON reads as (objects become dictionaries, integers stay
    /// integers), so other programs and `securestore prefs get` see ordinary values.
    ///
    /// ```swift
    /// struct Window: Codable { var width: Int; var height: Int; var maximized: Bool }
    /// let preferences = try Preferences(app: "myapp")
    /// try preferences.set(encoding: Window(width: 1200, height: 800, maximized: false), forKey: "window")
    /// let window = try preferences.value(decoding: Window.self, forKey: "window")
    /// ```
    ///
    /// Dates are encoded as ISO-8601 strings and data as base64 strings (JSONEncoder's `.iso8601` and
    /// `.base64` strategies). A key named `$data` or `$date` in the encoded JSON would be read as the format's
    /// tagged values: avoid those two property names.
    /// - Throws: ``PreferencesError/Code/unsupportedValue`` when the value cannot be encoded (the message
    ///   names the type, never the value), and everything ``set(_:forKey:)`` throws.
    @discardableResult
    public func set<T: Encodable>(encoding value: T, forKey key: String) throws -> PreferencesWarning? {
        try set(Self.preferenceValue(encoding: value), forKey: key)
    }

    /// The value stored for `key` decoded as `T`, `nil` when there is none (registered defaults included).
    /// - Throws: ``PreferencesError/Code/typeMismatch`` when the stored value does not decode as `T` (the
    ///   message names the key and the type, never the value).
    public func value<T: Decodable>(decoding type: T.Type, forKey key: String) throws -> T? {
        guard let stored = value(forKey: key) else { return nil }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        decoder.dataDecodingStrategy = .base64
        do {
            let text = try FormatWriter.compact(stored)
            return try decoder.decode(T.self, from: Data(text.utf8))
        } catch {
            throw PreferencesError(
                .typeMismatch,
                "the value for \"\(Self.shortened(key))\" (\(stored.typeName)) does not decode as \(T.self)")
        }
    }

    /// The preference value `value`'s JSON encoding reads as.
    static func preferenceValue<T: Encodable>(encoding value: T) throws -> PreferenceValue {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.dataEncodingStrategy = .base64
        let bytes: Data
        do {
            bytes = try encoder.encode(value)
        } catch {
            throw PreferencesError(
                .unsupportedValue, "a value of type \(T.self) cannot be encoded as JSON")
        }
        do {
            return try FormatReader.value([UInt8](bytes))
        } catch {
            throw PreferencesError(
                .unsupportedValue,
                "the JSON encoding of a value of type \(T.self) cannot be stored: \(error.reason)")
        }
    }

    /// The keys whose stored values change — through this handle, another handle or another process — as an
    /// `AsyncSequence`, for as long as the sequence is iterated (see ``observe(queue:_:)``, which it wraps).
    ///
    /// ```swift
    /// let preferences = try Preferences(app: "myapp")
    /// for await keys in try preferences.changes() where keys.contains("theme") {
    ///     print("theme is now", preferences.get("theme", default: "light"))
    /// }
    /// ```
    /// - Throws: ``PreferencesError/Code/io`` when the directory cannot be watched.
    public func changes() throws -> AsyncStream<Set<String>> {
        let (stream, continuation) = AsyncStream.makeStream(of: Set<String>.self, bufferingPolicy: .unbounded)
        let observation = try observe { keys in continuation.yield(keys) }
        continuation.onTermination = { _ in observation.cancel() }
        return stream
    }
}

extension PreferenceValue: CustomStringConvertible {
    /// The value as compact JSON text, as the file keeps it: `"dark"`, `1200`, `true`, `[1, 2]`,
    /// `{"width": 800}`; data and dates as the format's tagged objects.
    public var description: String {
        (try? FormatWriter.compact(self)) ?? typeName
    }
}

extension Preferences {
    /// The stored values as a preferences document — the same format as the domain's file, whatever its
    /// location — for a backup or another machine (the `dconf dump` of this module). Registered defaults are not
    /// included.
    public func exportDocument() throws -> Data {
        Data(try FormatWriter.document(storedValues))
    }

    /// How many values the preferences document `document` holds (0 when it is not one): what `prefs import --json`
    /// reports after ``importDocument(_:replacing:)`` stored them.
    package static func documentValueCount(_ document: Data) -> Int {
        (try? FormatReader.document([UInt8](document)).count) ?? 0
    }

    /// Reads a document made by ``exportDocument()`` (or a domain's file) and stores its values as one version:
    /// added to the stored ones (a value for the same key replaced), or, with `replacing`, instead of them. Every
    /// limit is checked first; when one is hit or the document is damaged, nothing changes.
    ///
    /// - Throws: ``PreferencesError/Code/damagedFile`` (the line and column of the problem) for a document that is
    ///   not a preferences document, ``PreferencesError/Code/unsupportedFormat`` for a newer format version, and
    ///   everything ``set(_:forKey:)`` throws.
    @discardableResult
    public func importDocument(_ document: Data, replacing: Bool = false) throws -> PreferencesWarning? {
        let imported: [String: PreferenceValue]
        do {
            imported = try FormatReader.document([UInt8](document))
        } catch {
            throw PreferencesError(
                error.newerVersion ? .unsupportedFormat : .damagedFile,
                "the document to import is not a preferences document: \(error.text); nothing was changed")
        }
        return try update { values in
            if replacing { values = imported } else { values.merge(imported) { _, new in new } }
        }
    }
}
