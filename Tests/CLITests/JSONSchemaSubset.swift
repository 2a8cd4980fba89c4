import Foundation

/// A JSON value as JSONDecoder reads it, keeping `true` apart from `1` and `1` apart from `1.5`.
enum JSONValue: Decodable, Equatable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let bool = try? container.decode(Bool.self) {
            self = .bool(bool)
        } else if let integer = try? container.decode(Int64.self) {
            self = .integer(integer)
        } else if let number = try? container.decode(Double.self) {
            self = .number(number)
        } else if let string = try? container.decode(String.self) {
            self = .string(string)
        } else if let array = try? container.decode([JSONValue].self) {
            self = .array(array)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// The one JSON document `text` holds.
    static func parse(_ text: String) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
    }

    /// The JSON Schema type names this value has (`integer` is also a `number`).
    var typeNames: Set<String> {
        switch self {
        case .null: ["null"]
        case .bool: ["boolean"]
        case .integer: ["integer", "number"]
        case .number: ["number"]
        case .string: ["string"]
        case .array: ["array"]
        case .object: ["object"]
        }
    }
}

/// The schemas of Docs/json and a validator for the subset of JSON Schema (draft 2020-12) they are written in:
/// `type`, `properties`, `required`, `additionalProperties: false`, `items`, `enum`, `const`, `pattern`,
/// `minimum`, `anyOf`, and `$ref` to `#/$defs/…` of a file in the same folder. A schema that uses any other keyword
/// is refused (``problems()``), so that nothing in a schema is silently not checked; so is an object schema
/// without `additionalProperties: false` or whose `required` does not list every property.
struct JSONSchemaSubset {
    static let keywords: Set<String> = [
        "$schema", "$defs", "$ref", "title", "description", "type", "properties", "required", "additionalProperties",
        "items", "enum", "const", "pattern", "minimum", "anyOf",
    ]

    /// Every `*.schema.json` of the folder, by file name.
    let files: [String: JSONValue]

    init(directory: String) throws {
        var files: [String: JSONValue] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) where name.hasSuffix(".schema.json") {
            let text = try String(contentsOfFile: directory + "/" + name, encoding: .utf8)
            files[name] = try JSONValue.parse(text)
        }
        self.files = files
    }

    /// What is wrong with the schemas themselves: unknown keywords, objects open to other properties or with
    /// optional ones, references that lead nowhere.
    func problems() -> [String] {
        var problems: [String] = []
        func visit(_ schema: JSONValue, _ file: String, _ path: String) {
            guard case .object(let members) = schema else {
                problems.append("\(file)\(path): a schema must be an object")
                return
            }
            for key in members.keys where !Self.keywords.contains(key) {
                problems.append("\(file)\(path): \(key) is not in the subset the test checks")
            }
            if case .string(let reference)? = members["$ref"], resolve(reference, from: file) == nil {
                problems.append("\(file)\(path): $ref \(reference) leads nowhere")
            }
            if case .object(let properties)? = members["properties"] {
                if members["additionalProperties"] != .bool(false) {
                    problems.append("\(file)\(path): an object schema needs additionalProperties: false")
                }
                let required = Set(members["required"].map { value -> [String] in
                    guard case .array(let names) = value else { return [] }
                    return names.compactMap { if case .string(let name) = $0 { name } else { nil } }
                } ?? [])
                if required != Set(properties.keys) {
                    problems.append("\(file)\(path): required must list every property (a key is null, never left out)")
                }
                for (name, property) in properties { visit(property, file, path + "/properties/" + name) }
            }
            if case .object(let definitions)? = members["$defs"] {
                for (name, definition) in definitions { visit(definition, file, path + "/$defs/" + name) }
            }
            if let items = members["items"] { visit(items, file, path + "/items") }
            if case .array(let alternatives)? = members["anyOf"] {
                for (index, alternative) in alternatives.enumerated() { visit(alternative, file, path + "/anyOf/\(index)") }
            }
        }
        for (file, schema) in files.sorted(by: { $0.key < $1.key }) { visit(schema, file, "") }
        return problems
    }

    /// What in `instance` does not match the schema file `file` (empty when it matches).
    func validate(_ instance: JSONValue, against file: String) -> [String] {
        guard let schema = files[file] else { return ["there is no schema \(file)"] }
        var errors: [String] = []
        check(instance, schema, file: file, at: "$", into: &errors)
        return errors
    }

    /// The schema `reference` names (`other.schema.json#/$defs/name` or `#/$defs/name`) as seen from `file`, and
    /// the file it is in.
    private func resolve(_ reference: String, from file: String) -> (schema: JSONValue, file: String)? {
        let parts = reference.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
        let target = parts[0].isEmpty ? file : String(parts[0])
        guard var node = files[target] else { return nil }
        let pointer = parts.count > 1 ? String(parts[1]) : ""
        for token in pointer.split(separator: "/") {
            guard case .object(let members) = node, let next = members[String(token)] else { return nil }
            node = next
        }
        return (node, target)
    }

    private func check(_ value: JSONValue, _ schema: JSONValue, file: String, at path: String, into errors: inout [String]) {
        guard case .object(let rules) = schema else { return }
        if case .string(let reference)? = rules["$ref"] {
            guard let (target, targetFile) = resolve(reference, from: file) else {
                errors.append("\(path): $ref \(reference) leads nowhere")
                return
            }
            check(value, target, file: targetFile, at: path, into: &errors)
        }
        switch rules["type"] {
        case .string(let type)? where !value.typeNames.contains(type):
            errors.append("\(path): \(value) is not of type \(type)")
            return
        case .array(let types)?:
            let names = Set(types.compactMap { if case .string(let name) = $0 { name } else { nil } })
            if names.isDisjoint(with: value.typeNames) {
                errors.append("\(path): \(value) is none of the types \(names.sorted())")
                return
            }
        default: break
        }
        if case .array(let allowed)? = rules["enum"], !allowed.contains(value) {
            errors.append("\(path): \(value) is not one of \(allowed)")
        }
        if let constant = rules["const"], constant != value {
            errors.append("\(path): \(value) is not \(constant)")
        }
        if case .string(let pattern)? = rules["pattern"], case .string(let text) = value,
            text.range(of: pattern, options: .regularExpression) == nil
        {
            errors.append("\(path): \(text.debugDescription) does not match \(pattern)")
        }
        if let minimum = rules["minimum"] {
            let bound: Double? = switch minimum { case .integer(let i): Double(i); case .number(let d): d; default: nil }
            let number: Double? = switch value { case .integer(let i): Double(i); case .number(let d): d; default: nil }
            if let bound, let number, number < bound { errors.append("\(path): \(number) is below \(bound)") }
        }
        if case .array(let alternatives)? = rules["anyOf"] {
            let matches = alternatives.contains { alternative in
                var scratch: [String] = []
                check(value, alternative, file: file, at: path, into: &scratch)
                return scratch.isEmpty
            }
            if !matches { errors.append("\(path): \(value) matches none of anyOf") }
        }
        if case .object(let members) = value {
            let properties: [String: JSONValue]
            if case .object(let declared)? = rules["properties"] { properties = declared } else { properties = [:] }
            if case .array(let required)? = rules["required"] {
                for case .string(let name) in required where members[name] == nil {
                    errors.append("\(path): the key \(name) is missing")
                }
            }
            for (name, member) in members.sorted(by: { $0.key < $1.key }) {
                if let property = properties[name] {
                    check(member, property, file: file, at: path + "." + name, into: &errors)
                } else if rules["additionalProperties"] == .bool(false) {
                    errors.append("\(path): the key \(name) is not in the schema")
                }
            }
        }
        if case .array(let elements) = value, let items = rules["items"] {
            for (index, element) in elements.enumerated() {
                check(element, items, file: file, at: path + "[\(index)]", into: &errors)
            }
        }
    }
}
