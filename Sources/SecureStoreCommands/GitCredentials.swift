package import Keychain
internal import Foundation
internal import Glibc
internal import SecureStoreCore

/// git's credential-helper protocol (gitcredentials(7)) over the keychain: `get`, `store` and `erase`.
///
/// Each credential is one keychain item: service `<app>.git`, account
/// `<protocol>://<username>@<host>[/<path>]` (username and path percent-encoded), and as its secret
/// the text lines `password=…`, and when given `password_expiry_utc=…` and `oauth_refresh_token=…`.
package struct GitCredentialStore: Sendable {
    /// The keychain the credentials live in.
    package let keychain: Keychain
    /// The keychain service of the credentials.
    package let service: String

    /// A store on `service` in `keychain`.
    package init(keychain: Keychain, service: String) {
        self.keychain = keychain
        self.service = service
    }

    /// The attributes of one request or answer, in order. Values may be secret (`password`); this
    /// type's description never prints them.
    package struct Message: Sendable, CustomStringConvertible {
        /// The `key=value` pairs.
        package var fields: [(key: String, value: String)] = []

        /// An empty message.
        package init() {}

        /// Parses `key=value` lines up to a blank line or the end; lines without `=` are ignored.
        package init(parsing text: String) {
            for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
                let line = line.hasSuffix("\r") ? line.dropLast() : line
                if line.isEmpty { break }
                guard let equals = line.firstIndex(of: "=") else { continue }
                fields.append((String(line[..<equals]), String(line[line.index(after: equals)...])))
            }
        }

        /// The last value of `key` (git: a later line overrides an earlier one).
        package subscript(key: String) -> String? {
            get { fields.last { $0.key == key }?.value }
            set {
                fields.removeAll { $0.key == key }
                if let newValue { fields.append((key, newValue)) }
            }
        }

        /// The message as protocol text (ends with a newline; no blank line).
        package var serialized: String { fields.map { "\($0.key)=\($0.value)\n" }.joined() }

        /// The keys only: values may be passwords.
        package var description: String { "GitCredential(\(fields.map(\.key).joined(separator: ", ")))" }
    }

    /// The answer to `get`: username and password (and expiry, refresh token) of the first stored
    /// credential that matches the request, or nil. An expired password is not returned.
    package func get(_ request: Message, now: Double = currentUnixTime()) throws -> Message? {
        for item in try matches(request) {
            guard let secret = try keychain.secret(service: service, account: item.account),
                let text = secret.stringValue()
            else { continue }
            let stored = Message(parsing: text)
            if let expiry = stored["password_expiry_utc"].flatMap(Double.init), expiry <= now { continue }
            var answer = Message()
            answer["username"] = item.username
            for key in ["password", "password_expiry_utc", "oauth_refresh_token"] {
                if let value = stored[key] { answer[key] = value }
            }
            return answer
        }
        return nil
    }

    /// Stores the credential of `request` (it needs protocol, host, username and password).
    package func store(_ request: Message) throws {
        guard let proto = request["protocol"], let host = request["host"], let username = request["username"],
            let password = request["password"]
        else { return }  // git sends incomplete credentials at times; storing nothing is the protocol's answer
        var stored = Message()
        stored["password"] = password
        for key in ["password_expiry_utc", "oauth_refresh_token"] {
            if let value = request[key] { stored[key] = value }
        }
        let account = Self.account(protocol: proto, host: host, path: request["path"], username: username)
        try keychain.set(
            Secret(string: stored.serialized), service: service, account: account,
            label: "Git: \(proto)://\(host)\(request["path"].map { "/" + $0 } ?? "") (\(username))")
    }

    /// Erases the matching credentials — only those whose stored password equals the request's
    /// password when the request carries one, so that a stale rejection cannot erase a newer password.
    package func erase(_ request: Message) throws {
        for item in try matches(request) {
            if let password = request["password"] {
                guard let secret = try keychain.secret(service: service, account: item.account),
                    let text = secret.stringValue(),
                    let stored = Message(parsing: text)["password"],
                    Secret(string: stored) == Secret(string: password)
                else { continue }
            }
            try keychain.delete(service: service, account: item.account)
        }
    }

    // MARK: - Accounts

    struct StoredItem {
        let account: String
        let proto: String
        let host: String
        let path: String?
        let username: String
    }

    /// Stored items matching the request's protocol and host, and its path and username when given.
    func matches(_ request: Message) throws -> [StoredItem] {
        guard let proto = request["protocol"], let host = request["host"] else { return [] }
        return try keychain.accounts(service: service).compactMap(Self.parse).filter { item in
            item.proto == proto && item.host == host
                && (request["path"] == nil || item.path == request["path"])
                && (request["username"] == nil || item.username == request["username"])
        }
    }

    static func account(protocol proto: String, host: String, path: String?, username: String) -> String {
        var account = "\(proto)://\(percentEncode(username))@\(host)"
        if let path, !path.isEmpty { account += "/" + percentEncode(path) }
        return account
    }

    static func parse(_ account: String) -> StoredItem? {
        guard let schemeEnd = account.range(of: "://") else { return nil }
        let proto = String(account[..<schemeEnd.lowerBound])
        let rest = account[schemeEnd.upperBound...]
        guard let at = rest.firstIndex(of: "@") else { return nil }
        let username = percentDecode(String(rest[..<at]))
        let hostAndPath = rest[rest.index(after: at)...]
        if let slash = hostAndPath.firstIndex(of: "/") {
            return StoredItem(
                account: account, proto: proto, host: String(hostAndPath[..<slash]),
                path: percentDecode(String(hostAndPath[hostAndPath.index(after: slash)...])), username: username)
        }
        return StoredItem(account: account, proto: proto, host: String(hostAndPath), path: nil, username: username)
    }

    private static func percentEncode(_ text: String) -> String {
        var result = ""
        for byte in text.utf8 {
            let safe = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "~")
            if safe {
                result.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                result += "%" + hexString([byte]).uppercased()
            }
        }
        return result
    }

    /// Decodes `%XX` escapes; a `%` that does not start one is kept as it is.
    private static func percentDecode(_ text: String) -> String {
        let utf8 = Array(text.utf8)
        var bytes: [UInt8] = []
        var index = 0
        while index < utf8.count {
            if utf8[index] == UInt8(ascii: "%"), index + 2 < utf8.count, let high = hexValue(utf8[index + 1]),
                let low = hexValue(utf8[index + 2])
            {
                bytes.append(high << 4 | low)
                index += 3
            } else {
                bytes.append(utf8[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// Seconds since 1970 now, as git's `password_expiry_utc` counts them.
package func currentUnixTime() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}
