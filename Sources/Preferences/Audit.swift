// The preferences audit: sizes against the limits, and values that look like secrets.
// A pure function of the values; the renderers produce the text the CLI prints. Never prints a value.
internal import Foundation
internal import SecureStoreCore

/// A reason a value looks like a secret. Rules are offline and look only at the value's shape and the
/// name of the key that holds it.
public struct SecretRule: Hashable, Sendable, CustomStringConvertible {
    /// A stable identifier, e.g. `"github-token"`.
    public let id: String
    /// What the rule recognises, e.g. "GitHub token prefix (ghp_, gho_, github_pat_…)".
    public let summary: String

    /// The identifier.
    public var description: String { id }

    /// `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_` followed by 30+ letters and digits, or `github_pat_…`.
    public static let githubToken = SecretRule(id: "github-token", summary: "GitHub token prefix (ghp_, gho_, github_pat_...)")
    /// `xoxb-`, `xoxp-`, `xoxa-`, `xoxr-`, `xoxs-` followed by 10+ token characters.
    public static let slackToken = SecretRule(id: "slack-token", summary: "Slack token prefix (xoxb-, xoxp-...)")
    /// `AKIA` or `ASIA` followed by exactly 16 upper-case letters and digits.
    public static let awsAccessKey = SecretRule(id: "aws-access-key", summary: "AWS access key ID (AKIA..., ASIA...)")
    /// `sk-` followed by 20+ token characters mixing upper case, lower case and digits (OpenAI, Anthropic and
    /// similar API keys), or Stripe's `sk_live_` / `rk_live_`.
    public static let apiSecretKey = SecretRule(id: "sk-secret-key", summary: "API secret key prefix (sk-..., sk_live_...)")
    /// `glpat-` followed by 20+ token characters.
    public static let gitlabToken = SecretRule(id: "gitlab-token", summary: "GitLab personal access token prefix (glpat-)")
    /// Three base64url segments separated by dots, the first two starting `eyJ` (a JSON object).
    public static let jwt = SecretRule(id: "jwt", summary: "JSON Web Token (eyJ....eyJ....sig)")
    /// A `-----BEGIN … PRIVATE KEY-----` block.
    public static let pemPrivateKey = SecretRule(id: "pem-private-key", summary: "PEM private key block")
    /// A URL with a password in it: `scheme://user:password@host`.
    public static let urlCredentials = SecretRule(id: "url-credentials", summary: "URL with a user name and password")
    /// Any non-empty string under a key named like a password (`password`, `dbPassword`, `passphrase`, `pwd`).
    public static let passwordName = SecretRule(id: "password-name", summary: "value of a key named like a password")
    /// A random-looking string (16+ characters, no spaces, high entropy) or 16+ bytes of data under a key
    /// named like a secret (`token`, `secret`, `apiKey`, `privateKey`, `credentials`…).
    public static let secretName = SecretRule(id: "secret-name", summary: "random-looking value under a key named like a secret")
}

/// A value the audit suspects is a secret. Carries the key, the rule and the length, never the value.
public struct SecretFinding: Hashable, Sendable {
    /// The top-level key holding the value (pass it to ``Preferences/value(forKey:as:)`` and
    /// ``Preferences/remove(_:)``).
    public let key: String
    /// Where inside that key's value: the key itself, or e.g. `accounts[1].token`.
    public let path: String
    /// Why it looks like a secret.
    public let rule: SecretRule
    /// The length of the suspected secret: characters for a string, bytes for data.
    public let length: Int
}

/// One key of the audit's size listing.
public struct KeySize: Hashable, Sendable {
    /// The key.
    public let key: String
    /// Bytes of the compact encoding of its value (the unit of the per-value limit).
    public let valueSize: Int
    /// Key bytes plus value bytes: this key's share of the total.
    public let entrySize: Int
    /// Whether the value is over the per-value limit.
    public let isOverValueLimit: Bool
}

/// The result of an audit: what a CLI prints, and whether it should exit non-zero.
public struct PreferencesAuditReport: Sendable, Hashable {
    /// The domain file audited.
    public let path: String
    /// The limits audited against.
    public let limits: PreferencesLimits
    /// The domain's total size in bytes.
    public let totalSize: Int
    /// Every key with its size, largest first (then by name).
    public let keys: [KeySize]
    /// Values that look like secrets, in key order.
    public let secrets: [SecretFinding]

    /// Keys whose value is over the per-value limit, largest first.
    public var oversizeKeys: [KeySize] { keys.filter(\.isOverValueLimit) }
    /// Whether the total is above the soft limit.
    public var isAboveSoftLimit: Bool { totalSize > limits.softTotalSize }
    /// Whether the total is above the hard limit.
    public var isAboveHardLimit: Bool { totalSize > limits.hardTotalSize }
    /// True when the hard limit is exceeded or a value looks like a secret: a CLI should exit non-zero.
    public var shouldFail: Bool { isAboveHardLimit || !secrets.isEmpty }

    /// A report for people: usage bar against the hard limit, keys largest first, oversize keys, secrets
    /// (named by key, rule and length only) and a verdict line.
    public func renderText() -> String {
        var lines: [String] = []
        lines.append("Preferences audit of \(path)")
        let percent = limits.hardTotalSize > 0 ? Double(totalSize) * 100 / Double(limits.hardTotalSize) : 0
        let width = 40
        let filled = min(width, Int((percent / 100 * Double(width)).rounded(.up)))
        lines.append(
            "Total \(Self.bytes(totalSize)) of \(Self.bytes(limits.hardTotalSize)) (hard limit; soft limit "
                + "\(Self.bytes(limits.softTotalSize)))")
        lines.append(
            "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "] "
                + String(format: "%.1f%%", percent)
                + (isAboveHardLimit ? "  OVER THE HARD LIMIT" : isAboveSoftLimit ? "  above the soft limit" : ""))
        lines.append("")
        if keys.isEmpty {
            lines.append("No keys.")
        } else {
            lines.append("Keys, largest first (value bytes; per-value limit \(Self.bytes(limits.maxValueSize))):")
            let column = keys.map { String($0.valueSize).count }.max() ?? 1
            for entry in keys {
                let size = String(entry.valueSize)
                lines.append(
                    "  " + String(repeating: " ", count: column - size.count) + size + "  " + Self.printable(entry.key)
                        + (entry.isOverValueLimit ? "  OVER THE PER-VALUE LIMIT" : ""))
            }
        }
        let oversize = oversizeKeys
        if !oversize.isEmpty {
            lines.append("")
            lines.append("\(oversize.count) key(s) over the per-value limit of \(Self.bytes(limits.maxValueSize)):")
            for entry in oversize { lines.append("  \(Self.printable(entry.key)) (\(entry.valueSize) bytes)") }
        }
        lines.append("")
        if secrets.isEmpty {
            lines.append("No values look like secrets.")
        } else {
            lines.append("\(secrets.count) value(s) look like secrets (values not shown):")
            for finding in secrets {
                lines.append(
                    "  \(Self.printable(finding.path)): \(finding.rule.summary) [\(finding.rule.id)], "
                        + "length \(finding.length)")
            }
            lines.append("  Move secrets to the Keychain and remove them from preferences.")
        }
        lines.append("")
        var problems: [String] = []
        if isAboveHardLimit { problems.append("over the hard size limit") }
        if !secrets.isEmpty { problems.append("\(secrets.count) possible secret(s)") }
        lines.append(problems.isEmpty ? "Result: OK" : "Result: FAIL (" + problems.joined(separator: ", ") + ")")
        return lines.joined(separator: "\n") + "\n"
    }

    /// The report as a JSON object (keys sorted, two-space indentation): `path`, `totalSize`, `limits`,
    /// `aboveSoftLimit`, `aboveHardLimit`, `keys` (`key`, `valueSize`, `entrySize`, `overValueLimit`),
    /// `secrets` (`key`, `path`, `rule`, `summary`, `length`) and `fail`.
    public func renderJSON() -> String {
        let document: PreferenceValue = .dictionary([
            "path": .string(path),
            "totalSize": .int(totalSize),
            "limits": .dictionary([
                "maxKeyLength": .int(limits.maxKeyLength), "maxValueSize": .int(limits.maxValueSize),
                "softTotalSize": .int(limits.softTotalSize), "hardTotalSize": .int(limits.hardTotalSize),
            ]),
            "aboveSoftLimit": .bool(isAboveSoftLimit),
            "aboveHardLimit": .bool(isAboveHardLimit),
            "keys": .array(
                keys.map {
                    .dictionary([
                        "key": .string($0.key), "valueSize": .int($0.valueSize), "entrySize": .int($0.entrySize),
                        "overValueLimit": .bool($0.isOverValueLimit),
                    ])
                }),
            "secrets": .array(
                secrets.map {
                    .dictionary([
                        "key": .string($0.key), "path": .string($0.path), "rule": .string($0.rule.id),
                        "summary": .string($0.rule.summary), "length": .int($0.length),
                    ])
                }),
            "fail": .bool(shouldFail),
        ])
        return (try? FormatWriter.pretty(document)) ?? "{}"
    }

    private static func bytes(_ count: Int) -> String {
        count < 1024 ? "\(count) bytes" : String(format: "%.1f KiB", Double(count) / 1024)
    }

    /// A key name as a terminal may show it: every control, format character (bidi overrides among them) and
    /// line separator escaped, so that one key is one line and cannot act on the terminal.
    private static func printable(_ key: String) -> String {
        escapedForTerminal(key)
    }
}

/// The audit as a pure function of values and limits.
public enum PreferencesAudit {
    /// Audits `values` (a domain's stored values) against `limits`. `path` is only copied into the report.
    public static func run(values: [String: PreferenceValue], limits: PreferencesLimits, path: String) -> PreferencesAuditReport {
        var keys: [KeySize] = []
        var secrets: [SecretFinding] = []
        for (key, value) in values {
            let valueSize = (try? FormatWriter.compactSize(value)) ?? 0
            keys.append(
                KeySize(
                    key: key, valueSize: valueSize, entrySize: key.utf8.count + valueSize,
                    isOverValueLimit: valueSize > limits.maxValueSize))
            scan(value, name: key, path: key, topKey: key, into: &secrets)
        }
        keys.sort { $0.valueSize != $1.valueSize ? $0.valueSize > $1.valueSize : $0.key < $1.key }
        secrets.sort { ($0.key, $0.path, $0.rule.id) < ($1.key, $1.path, $1.rule.id) }
        return PreferencesAuditReport(
            path: path, limits: limits, totalSize: keys.reduce(0) { $0 + $1.entrySize }, keys: keys, secrets: secrets)
    }

    /// The rules a single string value breaks when stored under a key named `name`; empty for an ordinary value.
    public static func rules(for text: String, name: String) -> [SecretRule] {
        var found: [SecretRule] = []
        let bytes = Array(text.utf8)
        found.append(contentsOf: SecretShapes.prefixRules(bytes))
        if SecretShapes.isJWT(bytes) { found.append(.jwt) }
        if text.contains("-----BEGIN "), text.contains("PRIVATE KEY-----") { found.append(.pemPrivateKey) }
        if SecretShapes.hasURLCredentials(text) { found.append(.urlCredentials) }
        if found.isEmpty {
            switch SecretNames.kind(of: name) {
            case .password where !text.isEmpty: found.append(.passwordName)
            case .secret where SecretShapes.looksRandom(text): found.append(.secretName)
            default: break
            }
        }
        return found
    }

    private static func scan(
        _ value: PreferenceValue, name: String, path: String, topKey: String, into findings: inout [SecretFinding]
    ) {
        switch value {
        case .string(let text):
            for rule in rules(for: text, name: name) {
                findings.append(SecretFinding(key: topKey, path: path, rule: rule, length: text.count))
            }
        case .data(let data):
            if data.count >= 16, SecretNames.kind(of: name) != .ordinary {
                findings.append(SecretFinding(key: topKey, path: path, rule: .secretName, length: data.count))
            }
        case .array(let values):
            for (index, element) in values.enumerated() {
                scan(element, name: name, path: path + "[\(index)]", topKey: topKey, into: &findings)
            }
        case .dictionary(let values):
            for (key, element) in values {
                scan(element, name: key, path: path + "." + key, topKey: topKey, into: &findings)
            }
        case .bool, .int, .double, .date:
            break
        }
    }
}

/// Classifies key names by their last word: `dbPassword` is a password, `apiKey` a secret, `passwordHint`
/// and `hotkey` ordinary.
enum SecretNames {
    enum Kind { case ordinary, password, secret }

    static let passwordWords: Set<String> = ["password", "passwd", "passphrase", "pwd"]
    static let secretWords: Set<String> = [
        "token", "secret", "secrets", "credential", "credentials", "apikey", "secretkey", "privatekey",
        "accesskey", "bearer", "jwt",
    ]
    /// Words that make a following "key" a secret: `apiKey`, `privateKey`, `signingKey`…
    static let keyQualifiers: Set<String> = [
        "api", "access", "secret", "private", "signing", "encryption", "auth", "master", "license", "client",
        "app", "session", "ssh",
    ]

    static func words(_ name: String) -> [String] {
        var words: [String] = []
        var current = ""
        let scalars = Array(name.unicodeScalars)
        for (index, scalar) in scalars.enumerated() {
            let isUpper = CharacterSet.uppercaseLetters.contains(scalar)
            let isAlnum = CharacterSet.alphanumerics.contains(scalar)
            if !isAlnum {
                if !current.isEmpty { words.append(current) }
                current = ""
                continue
            }
            if isUpper, !current.isEmpty {
                let previous = scalars[index - 1]
                let nextIsLower = index + 1 < scalars.count && CharacterSet.lowercaseLetters.contains(scalars[index + 1])
                // "apiKey" → api|Key; "APIKey" → API|Key; "ID" stays one word.
                if CharacterSet.lowercaseLetters.contains(previous) || CharacterSet.decimalDigits.contains(previous)
                    || (CharacterSet.uppercaseLetters.contains(previous) && nextIsLower)
                {
                    words.append(current)
                    current = ""
                }
            }
            current.unicodeScalars.append(scalar)
        }
        if !current.isEmpty { words.append(current) }
        return words.map { $0.lowercased() }
    }

    static func kind(of name: String) -> Kind {
        let parts = words(name)
        guard let last = parts.last else { return .ordinary }
        if passwordWords.contains(last) { return .password }
        if secretWords.contains(last) { return .secret }
        if last == "key" {
            if parts.count == 1 { return .secret }
            if keyQualifiers.contains(parts[parts.count - 2]) { return .secret }
        }
        return .ordinary
    }
}

/// Shapes of well-known secrets.
enum SecretShapes {
    static func isAlnum(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
    }
    static func isTokenChar(_ b: UInt8) -> Bool { isAlnum(b) || b == UInt8(ascii: "_") || b == UInt8(ascii: "-") }
    static func isUpperOrDigit(_ b: UInt8) -> Bool { (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) }

    private enum Characters: Sendable {
        case alphanumeric, token, upperOrDigit
        func allows(_ b: UInt8) -> Bool {
            switch self {
            case .alphanumeric: SecretShapes.isAlnum(b)
            case .token: SecretShapes.isTokenChar(b)
            case .upperOrDigit: SecretShapes.isUpperOrDigit(b)
            }
        }
    }

    private struct Prefix: Sendable {
        var text: String
        var rule: SecretRule
        /// Characters required after the prefix (exactly this many when `exact`).
        var minimum: Int
        var allowed: Characters
        var exact = false
        /// Require upper case, lower case and a digit after the prefix (keeps `sk-dark-theme-variant-2` out).
        var mixed = false
    }

    private static let prefixes: [Prefix] = [
        Prefix(text: "ghp_", rule: .githubToken, minimum: 30, allowed: .alphanumeric),
        Prefix(text: "gho_", rule: .githubToken, minimum: 30, allowed: .alphanumeric),
        Prefix(text: "ghu_", rule: .githubToken, minimum: 30, allowed: .alphanumeric),
        Prefix(text: "ghs_", rule: .githubToken, minimum: 30, allowed: .alphanumeric),
        Prefix(text: "ghr_", rule: .githubToken, minimum: 30, allowed: .alphanumeric),
        Prefix(text: "github_pat_", rule: .githubToken, minimum: 20, allowed: .token),
        Prefix(text: "xoxb-", rule: .slackToken, minimum: 10, allowed: .token),
        Prefix(text: "xoxp-", rule: .slackToken, minimum: 10, allowed: .token),
        Prefix(text: "xoxa-", rule: .slackToken, minimum: 10, allowed: .token),
        Prefix(text: "xoxr-", rule: .slackToken, minimum: 10, allowed: .token),
        Prefix(text: "xoxs-", rule: .slackToken, minimum: 10, allowed: .token),
        Prefix(text: "AKIA", rule: .awsAccessKey, minimum: 16, allowed: .upperOrDigit, exact: true),
        Prefix(text: "ASIA", rule: .awsAccessKey, minimum: 16, allowed: .upperOrDigit, exact: true),
        Prefix(text: "sk-", rule: .apiSecretKey, minimum: 20, allowed: .token, mixed: true),
        Prefix(text: "sk_live_", rule: .apiSecretKey, minimum: 16, allowed: .alphanumeric),
        Prefix(text: "rk_live_", rule: .apiSecretKey, minimum: 16, allowed: .alphanumeric),
        Prefix(text: "glpat-", rule: .gitlabToken, minimum: 20, allowed: .token),
    ]

    /// Known token prefixes at a word boundary, followed by enough token characters.
    static func prefixRules(_ bytes: [UInt8]) -> [SecretRule] {
        var found: [SecretRule] = []
        for prefix in prefixes where !found.contains(prefix.rule) {
            let p = Array(prefix.text.utf8)
            var start = 0
            while start + p.count <= bytes.count {
                defer { start += 1 }
                guard bytes[start] == p[0], start == 0 || !isTokenChar(bytes[start - 1]),
                    bytes[start..<(start + p.count)].elementsEqual(p)
                else { continue }
                var end = start + p.count
                while end < bytes.count && prefix.allowed.allows(bytes[end]) { end += 1 }
                let length = end - start - p.count
                let followedByTokenChar = end < bytes.count && isTokenChar(bytes[end])
                let suffix = bytes[(start + p.count)..<end]
                let mixedEnough =
                    !prefix.mixed
                    || (suffix.contains { $0 >= 0x41 && $0 <= 0x5A } && suffix.contains { $0 >= 0x61 && $0 <= 0x7A }
                        && suffix.contains { $0 >= 0x30 && $0 <= 0x39 })
                if mixedEnough,
                    prefix.exact ? (length == prefix.minimum && !followedByTokenChar) : length >= prefix.minimum
                {
                    found.append(prefix.rule)
                    break
                }
            }
        }
        return found
    }

    /// `eyJ…​.eyJ….sig` somewhere in the text, each part base64url.
    static func isJWT(_ bytes: [UInt8]) -> Bool {
        var start = 0
        while start + 3 <= bytes.count {
            defer { start += 1 }
            guard bytes[start] == UInt8(ascii: "e"), bytes[start + 1] == UInt8(ascii: "y"),
                bytes[start + 2] == UInt8(ascii: "J"), start == 0 || !isTokenChar(bytes[start - 1])
            else { continue }
            var segments: [Int] = [0]
            var index = start
            while index < bytes.count {
                let b = bytes[index]
                if isTokenChar(b) {
                    segments[segments.count - 1] += 1
                } else if b == UInt8(ascii: "."), segments.count < 3 {
                    segments.append(0)
                    if index + 3 < bytes.count, segments.count == 2,
                        !(bytes[index + 1] == UInt8(ascii: "e") && bytes[index + 2] == UInt8(ascii: "y")
                            && bytes[index + 3] == UInt8(ascii: "J"))
                    {
                        break
                    }
                } else {
                    break
                }
                index += 1
            }
            if segments.count == 3, segments[0] >= 10, segments[1] >= 10, segments[2] >= 16 { return true }
        }
        return false
    }

    /// `scheme://user:password@host…` with a non-empty password.
    static func hasURLCredentials(_ text: String) -> Bool {
        var rest = Substring(text)
        while let range = rest.range(of: "://") {
            let after = rest[range.upperBound...]
            let authorityEnd = after.firstIndex(where: { "/?# \t\n\"'".contains($0) }) ?? after.endIndex
            let authority = after[..<authorityEnd]
            if let at = authority.lastIndex(of: "@") {
                let userInfo = authority[..<at]
                if let colon = userInfo.firstIndex(of: ":"), userInfo.index(after: colon) < userInfo.endIndex {
                    return true
                }
            }
            rest = after
        }
        return false
    }

    /// 16+ characters without spaces, not a path or URL, with high Shannon entropy.
    static func looksRandom(_ text: String) -> Bool {
        let scalars = Array(text.unicodeScalars)
        guard scalars.count >= 16, scalars.count <= 4096 else { return false }
        if scalars.contains(where: { CharacterSet.whitespacesAndNewlines.contains($0) }) { return false }
        if text.hasPrefix("/") || text.hasPrefix("~") || text.hasPrefix("./") || text.contains("://") { return false }
        var counts: [Unicode.Scalar: Int] = [:]
        for scalar in scalars { counts[scalar, default: 0] += 1 }
        let total = Double(scalars.count)
        let entropy = counts.values.reduce(0.0) { sum, count in
            let p = Double(count) / total
            return sum - p * log2(p)
        }
        let hasDigit = scalars.contains { CharacterSet.decimalDigits.contains($0) }
        return entropy >= 3.0 && (hasDigit || entropy >= 3.8)
    }
}
