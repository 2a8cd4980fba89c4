// Associations between record types: belongsTo, hasOne, hasMany; joined in one query, or prefetched with one
// extra query per association (never one per row).

/// The columns of a foreign key in the child table, when they cannot be found in the schema (GRDB's name).
///
/// ```swift
/// import EncryptedDatabase
///
/// struct Author: Codable, FetchableRecord, PersistableRecord { var id: Int64; var name: String }
/// struct Book: Codable, FetchableRecord, PersistableRecord {
///     static let author = belongsTo(Author.self, using: ForeignKey(["writerId"]))
///     var id: Int64
///     var writerId: Int64
/// }
/// ```
public struct ForeignKey: Sendable {
    let columns: [String]
    let destinationColumns: [String]?

    /// The foreign key made of `columns` of the child table, referring to `destinationColumns` of the parent
    /// table (its primary key when `nil`). One column: composite keys are not supported by associations.
    public init(_ columns: [String], to destinationColumns: [String]? = nil) {
        self.columns = columns
        self.destinationColumns = destinationColumns
    }
}

/// What an association is made of; the public type only so that associations can share one protocol.
public struct _SQLAssociation: Sendable {
    enum Kind: Sendable { case belongsTo, hasOne, hasMany }
    let kind: Kind
    var key: String
    let originTable: String
    let originPrimaryKey: String
    let destinationTable: String
    let destinationPrimaryKey: String
    let foreignKey: ForeignKey?
    var filters: [SQLExpression] = []
    var orderings: [SQLOrdering] = []
    /// For an association through others (``TableRecord/hasMany(_:through:using:key:)``), the direct associations
    /// walked from the origin to the destination, in order; empty for a direct association.
    var steps: [_SQLAssociation] = []
    /// The alias of the associated table in a request (``TableAlias``), when one was given.
    var alias: String?

    /// The direct associations walked from the origin to the destination: the association itself when direct.
    /// The filters and order of a through association apply to its last step's destination.
    var chain: [_SQLAssociation] {
        guard !steps.isEmpty else { return [self] }
        var chain = steps
        chain[chain.count - 1].filters += filters
        chain[chain.count - 1].orderings = orderings.isEmpty ? chain[chain.count - 1].orderings : orderings
        return chain
    }

    /// The table that holds the foreign key, and the one it refers to.
    var childTable: String { kind == .belongsTo ? originTable : destinationTable }
    var parentTable: String { kind == .belongsTo ? destinationTable : originTable }
    var parentPrimaryKey: String { kind == .belongsTo ? destinationPrimaryKey : originPrimaryKey }
}

/// An association from records of `OriginRowDecoder` to records of `RowDecoder` (GRDB's names): use it with
/// ``Query/joining(required:)``, ``Query/including(required:)`` and their siblings.
public protocol Association: Sendable {
    /// The type the association starts from (`Book` in `Book.author`).
    associatedtype OriginRowDecoder: TableRecord
    /// The associated type (`Author` in `Book.author`).
    associatedtype RowDecoder: TableRecord
    /// What the association is made of.
    var _sqlAssociation: _SQLAssociation { get }
    /// An association made of `_sqlAssociation`.
    init(_sqlAssociation: _SQLAssociation)
}

/// An association to at most one record: ``BelongsToAssociation``, ``HasOneAssociation``.
public protocol AssociationToOne: Association {}

/// An association to any number of records: ``HasManyAssociation``.
public protocol AssociationToMany: Association {}

extension Association {
    /// The associated records that also match `predicate` (its columns are the associated table's).
    public func filter(_ predicate: some SQLSpecificExpressible) -> Self {
        var association = _sqlAssociation
        association.filters.append(predicate.sqlExpression)
        return Self(_sqlAssociation: association)
    }

    /// The associated records in this order (for ``Query/including(all:)``, the order of each array).
    public func order(_ orderings: any SQLOrderingTerm...) -> Self {
        var association = _sqlAssociation
        association.orderings = orderings.map(\.sqlOrdering)
        return Self(_sqlAssociation: association)
    }

    /// The association under another key: the name of the property that receives its records.
    public func forKey(_ key: String) -> Self {
        var association = _sqlAssociation
        association.key = key
        return Self(_sqlAssociation: association)
    }
}

/// The record a foreign key of the origin refers to: a book `belongsTo` its author.
public struct BelongsToAssociation<Origin: TableRecord, Destination: TableRecord>: AssociationToOne {
    /// `Origin`.
    public typealias OriginRowDecoder = Origin
    /// `Destination`.
    public typealias RowDecoder = Destination
    /// What the association is made of.
    public let _sqlAssociation: _SQLAssociation
    /// An association made of `_sqlAssociation`.
    public init(_sqlAssociation: _SQLAssociation) { self._sqlAssociation = _sqlAssociation }
}

/// The one record whose foreign key refers to the origin: a country `hasOne` profile.
public struct HasOneAssociation<Origin: TableRecord, Destination: TableRecord>: AssociationToOne {
    /// `Origin`.
    public typealias OriginRowDecoder = Origin
    /// `Destination`.
    public typealias RowDecoder = Destination
    /// What the association is made of.
    public let _sqlAssociation: _SQLAssociation
    /// An association made of `_sqlAssociation`.
    public init(_sqlAssociation: _SQLAssociation) { self._sqlAssociation = _sqlAssociation }
}

/// The records reached through another association (GRDB's name): a note `hasMany` tags through its
/// `noteTag` rows, with no view and no hand-given key.
public struct HasManyThroughAssociation<Origin: TableRecord, Destination: TableRecord>: AssociationToMany {
    /// `Origin`.
    public typealias OriginRowDecoder = Origin
    /// `Destination`.
    public typealias RowDecoder = Destination
    /// What the association is made of.
    public let _sqlAssociation: _SQLAssociation
    /// An association made of `_sqlAssociation`.
    public init(_sqlAssociation: _SQLAssociation) { self._sqlAssociation = _sqlAssociation }
}

/// The one record reached through another to-one association (GRDB's name): a book `hasOne` author profile
/// through its author.
public struct HasOneThroughAssociation<Origin: TableRecord, Destination: TableRecord>: AssociationToOne {
    /// `Origin`.
    public typealias OriginRowDecoder = Origin
    /// `Destination`.
    public typealias RowDecoder = Destination
    /// What the association is made of.
    public let _sqlAssociation: _SQLAssociation
    /// An association made of `_sqlAssociation`.
    public init(_sqlAssociation: _SQLAssociation) { self._sqlAssociation = _sqlAssociation }
}

/// The records whose foreign key refers to the origin: an author `hasMany` books.
public struct HasManyAssociation<Origin: TableRecord, Destination: TableRecord>: AssociationToMany {
    /// `Origin`.
    public typealias OriginRowDecoder = Origin
    /// `Destination`.
    public typealias RowDecoder = Destination
    /// What the association is made of.
    public let _sqlAssociation: _SQLAssociation
    /// An association made of `_sqlAssociation`.
    public init(_sqlAssociation: _SQLAssociation) { self._sqlAssociation = _sqlAssociation }
}

extension TableRecord {
    /// The record that a foreign key of this table refers to.
    ///
    /// The key (the name of the property that receives the record) is the destination's table name in the
    /// singular (`author`, and `author` for a table `authors`, as GRDB names it); the foreign
    /// key is found in the schema (`REFERENCES`), or given with `using:` where the table has none or several.
    public static func belongsTo<Destination: TableRecord>(
        _ destination: Destination.Type, key: String? = nil, using foreignKey: ForeignKey? = nil
    ) -> BelongsToAssociation<Self, Destination> {
        BelongsToAssociation(_sqlAssociation: association(.belongsTo, destination, key: key, foreignKey))
    }

    /// The one record of `destination` whose foreign key refers to this table. The key is the destination's
    /// table name in the singular.
    public static func hasOne<Destination: TableRecord>(
        _ destination: Destination.Type, key: String? = nil, using foreignKey: ForeignKey? = nil
    ) -> HasOneAssociation<Self, Destination> {
        HasOneAssociation(_sqlAssociation: association(.hasOne, destination, key: key, foreignKey))
    }

    /// The records of `destination` whose foreign key refers to this table. The key is the destination's table
    /// name in the plural (`book` → `books`, `category` → `categories`, `box` → `boxes`); a name already plural
    /// stays as it is (`note_tags`, not `note_tagses`).
    public static func hasMany<Destination: TableRecord>(
        _ destination: Destination.Type, key: String? = nil, using foreignKey: ForeignKey? = nil
    ) -> HasManyAssociation<Self, Destination> {
        HasManyAssociation(_sqlAssociation: association(.hasMany, destination, key: key, foreignKey))
    }

    /// The records of `destination` reached through `pivot` then `target` (GRDB's name): many-to-many without a
    /// view or a hand-given key. The key is `target`'s in the plural.
    ///
    /// ```swift
    /// import EncryptedDatabase
    ///
    /// struct Note: Codable, FetchableRecord, PersistableRecord {
    ///     static let noteTags = hasMany(NoteTag.self)
    ///     static let tags = hasMany(Tag.self, through: noteTags, using: NoteTag.tag)   // key "tags"
    ///     var id: Int64
    /// }
    /// struct NoteTag: Codable, FetchableRecord, PersistableRecord {
    ///     static let tag = belongsTo(Tag.self)
    ///     var noteId: Int64
    ///     var tagId: Int64
    /// }
    /// struct Tag: Codable, FetchableRecord, PersistableRecord { var id: Int64; var label: String }
    /// ```
    ///
    /// Each step's foreign key is found as for a direct association (or given with its own `using:`).
    public static func hasMany<Pivot: Association, Target: Association>(
        _ destination: Target.RowDecoder.Type, through pivot: Pivot, using target: Target, key: String? = nil
    ) -> HasManyThroughAssociation<Self, Target.RowDecoder>
    where Pivot.OriginRowDecoder == Self, Pivot.RowDecoder == Target.OriginRowDecoder {
        HasManyThroughAssociation(
            _sqlAssociation: through(pivot._sqlAssociation, target._sqlAssociation, Target.RowDecoder.self,
                                     kind: .hasMany, key: key ?? plural(target._sqlAssociation.key)))
    }

    /// The one record of `destination` reached through the to-one `pivot` then the to-one `target` (GRDB's
    /// name). The key is `target`'s.
    public static func hasOne<Pivot: AssociationToOne, Target: AssociationToOne>(
        _ destination: Target.RowDecoder.Type, through pivot: Pivot, using target: Target, key: String? = nil
    ) -> HasOneThroughAssociation<Self, Target.RowDecoder>
    where Pivot.OriginRowDecoder == Self, Pivot.RowDecoder == Target.OriginRowDecoder {
        HasOneThroughAssociation(
            _sqlAssociation: through(pivot._sqlAssociation, target._sqlAssociation, Target.RowDecoder.self,
                                     kind: .hasOne, key: key ?? target._sqlAssociation.key))
    }

    private static func through<Destination: TableRecord>(
        _ pivot: _SQLAssociation, _ target: _SQLAssociation, _ destination: Destination.Type,
        kind: _SQLAssociation.Kind, key: String
    ) -> _SQLAssociation {
        var association = _SQLAssociation(
            kind: kind, key: key, originTable: databaseTableName, originPrimaryKey: databasePrimaryKey,
            destinationTable: Destination.databaseTableName, destinationPrimaryKey: Destination.databasePrimaryKey,
            foreignKey: nil)
        association.steps = pivot.chain + target.chain
        return association
    }

    private static func association<Destination: TableRecord>(
        _ kind: _SQLAssociation.Kind, _ destination: Destination.Type, key: String?, _ foreignKey: ForeignKey?
    ) -> _SQLAssociation {
        let table = Destination.databaseTableName
        return _SQLAssociation(
            kind: kind, key: key ?? (kind == .hasMany ? plural(table) : singular(table)), originTable: databaseTableName,
            originPrimaryKey: databasePrimaryKey, destinationTable: table,
            destinationPrimaryKey: Destination.databasePrimaryKey, foreignKey: foreignKey)
    }

    /// Every row, with the rows of `association` joined; rows without one are left out. Nothing of the
    /// associated table is selected: use it to filter (``Association/filter(_:)``).
    public static func joining<A: Association>(required association: A) -> Query<Self>
    where A.OriginRowDecoder == Self { all().joining(required: association) }

    /// Every row, with the rows of `association` joined when there are some (`LEFT JOIN`).
    public static func joining<A: Association>(optional association: A) -> Query<Self>
    where A.OriginRowDecoder == Self { all().joining(optional: association) }

    /// Every row with its associated record, in one query; rows without one are left out.
    public static func including<A: AssociationToOne>(required association: A) -> Query<Self>
    where A.OriginRowDecoder == Self, A.RowDecoder: Decodable & SendableMetatype { all().including(required: association) }

    /// Every row with its associated record or `nil`, in one query.
    public static func including<A: AssociationToOne>(optional association: A) -> Query<Self>
    where A.OriginRowDecoder == Self, A.RowDecoder: Decodable & SendableMetatype { all().including(optional: association) }

    /// Every row with the array of its associated records, fetched with one more query.
    public static func including<A: AssociationToMany>(all association: A) -> Query<Self>
    where A.OriginRowDecoder == Self, A.RowDecoder: FetchableRecord { all().including(all: association) }
}

/// `word` in the plural, as GRDB's default keys of to-many associations are (its English rules, after Rails):
/// the last word of a `snake_case` or `camelCase` name is inflected, and a word already plural stays as it is —
/// `note_tags` → `note_tags`, not `note_tagses`; `noteTag` → `noteTags`, `category` → `categories`, `box` →
/// `boxes`, `status` → `statuses`, `person` → `people`.
package func plural(_ word: String) -> String {
    inflectingLastWord(of: word, irregular: irregularPlurals) { word in
        func replacing(_ count: Int, with ending: String) -> String { word.dropLast(count) + ending }
        if word.hasSuffix("matrix") { return replacing(1, with: "ces") }
        if word.hasSuffix("vertex") || word.hasSuffix("index") { return replacing(2, with: "ices") }
        if word == "mouse" || word == "louse" { return replacing(4, with: "ice") }
        if word == "ox" { return "oxen" }
        if word.hasSuffix("quiz") { return word + "zes" }
        if ["x", "ch", "ss", "sh"].contains(where: word.hasSuffix) { return word + "es" }
        if word.hasSuffix("y"), word.count > 1, !"aeiouy".contains(word.dropLast().last!) || word.hasSuffix("quy") {
            return replacing(1, with: "ies")
        }
        if word.hasSuffix("hive") { return word + "s" }
        if word.hasSuffix("fe"), !word.hasSuffix("ffe") { return replacing(2, with: "ves") }
        if word.hasSuffix("lf") || word.hasSuffix("rf") { return replacing(1, with: "ves") }
        if word.hasSuffix("sis") { return replacing(2, with: "es") }
        if word.hasSuffix("tum") || word.hasSuffix("ium") { return replacing(2, with: "a") }
        if ["buffalo", "tomato", "hero"].contains(where: word.hasSuffix) { return word + "es" }
        if word == "axis" || word == "testis" { return replacing(2, with: "es") }
        if ["alias", "bias", "canvas", "focus", "gas", "lens", "status", "bus"].contains(where: word.hasSuffix) {
            return word + "es"
        }
        if word.hasSuffix("octopus") || word.hasSuffix("virus") { return replacing(2, with: "i") }
        if word.hasSuffix("s") { return word }   // already plural: tags, notes, categories
        return word + "s"
    }
}

/// `word` in the singular, for the default names of aggregates (`notes` → `noteCount`, `note_tags` →
/// `note_tagCount`, `categories` → `categoryCount`), as GRDB names them.
package func singular(_ word: String) -> String {
    inflectingLastWord(of: word, irregular: irregularSingulars) { word in
        func replacing(_ count: Int, with ending: String) -> String { word.dropLast(count) + ending }
        if word.hasSuffix("matrices") { return replacing(3, with: "x") }
        if word.hasSuffix("vertices") || word.hasSuffix("indices") { return replacing(4, with: "ex") }
        if word == "mice" || word == "lice" { return replacing(3, with: "ouse") }
        if word == "oxen" { return "ox" }
        if word.hasSuffix("quizzes") { return replacing(3, with: "") }
        if word.hasSuffix("movies") { return replacing(1, with: "") }
        if word.hasSuffix("ies"), word.count > 3 { return replacing(3, with: "y") }
        if ["xes", "ches", "sses", "shes", "aliases", "biases", "statuses", "buses", "lenses", "gases", "focuses",
            "canvases", "buffaloes", "tomatoes", "heroes"].contains(where: word.hasSuffix) {
            return replacing(2, with: "")
        }
        if word.hasSuffix("hives") { return replacing(1, with: "") }
        if word.hasSuffix("lves") || word.hasSuffix("rves") { return replacing(3, with: "f") }
        if word.hasSuffix("ves") { return replacing(3, with: "fe") }
        if word.hasSuffix("ses") { return replacing(2, with: "is") }   // analyses → analysis
        if word.hasSuffix("octopi") || word.hasSuffix("viri") { return replacing(1, with: "us") }
        if word.hasSuffix("ss") || word.hasSuffix("us") || word.hasSuffix("is") { return word }
        if word.hasSuffix("s") { return replacing(1, with: "") }
        return word
    }
}

/// Irregular English plurals (GRDB's, after Rails), by singular, and the other way.
private let irregularPlurals = [
    "person": "people", "man": "men", "child": "children", "sex": "sexes", "move": "moves", "zombie": "zombies",
]
private let irregularSingulars = Dictionary(uniqueKeysWithValues: irregularPlurals.map { ($1, $0) })

/// Words that are the same in the singular and the plural.
private let uncountables: Set<String> = [
    "equipment", "information", "rice", "money", "species", "series", "fish", "sheep", "jeans", "police", "news",
]

/// `word` with its last word (after the last `_`, or from the last upper-case letter of a `camelCase` name)
/// inflected by `inflect` in lower case, its first letter's case kept; irregular and uncountable words first.
private func inflectingLastWord(
    of word: String, irregular: [String: String], _ inflect: (String) -> String
) -> String {
    var start = word.startIndex
    if let underscore = word.lastIndex(of: "_") {
        start = word.index(after: underscore)
    } else if let upper = word.lastIndex(where: \.isUppercase) {
        start = upper
    }
    let last = String(word[start...])
    let lowered = last.lowercased()
    guard !lowered.isEmpty, !uncountables.contains(lowered) else { return word }
    let inflected = irregular[lowered] ?? inflect(lowered)
    guard last != lowered else { return String(word[..<start]) + inflected }
    return String(word[..<start] + last.prefix(1) + inflected.dropFirst())   // `noteTag` → `noteTags`
}

// MARK: - In a query

/// A joined association: `decode` reads the associated record from its columns (`nil` for `joining`, which selects
/// none).
struct JoinPart: Sendable {
    var association: _SQLAssociation
    let required: Bool
    let decode: (@Sendable (Row, ColumnLookup) throws -> Any)?
}

/// A to-many association fetched by one more query: `fetch` runs it and groups the records by their foreign key.
struct PrefetchPart: Sendable {
    let association: _SQLAssociation
    let fetch: @Sendable (Database, String, StatementArguments) throws -> Prefetched
}

/// The records of a prefetched association by the parent key they refer to, and an empty array of their type.
@usableFromInline
struct Prefetched {
    /// The children of parents whose key is an integer (the common case: hashed as `Int64`, not as a
    /// `DatabaseValue`).
    let integerGroups: [Int64: Any]
    /// The children of parents whose key is another value (text, a blob, a real).
    let groups: [DatabaseValue: Any]
    let empty: Any

    @usableFromInline
    init(integerGroups: [Int64: Any], groups: [DatabaseValue: Any], empty: Any) {
        self.integerGroups = integerGroups
        self.groups = groups
        self.empty = empty
    }

    /// The children of the parent whose key is column `column` of `row`; the key's storage class must match, as
    /// in SQL's `IN` on the column's own type (an integer key finds the children of that integer).
    @inline(__always)
    func children(of row: Row, at column: Int) throws -> Any {
        if try row.isInteger(at: column) { return integerGroups[try row.int64(at: column)] ?? empty }
        return groups[try row.value(at: column)] ?? empty
    }
}

/// One table joined for an association: its alias, its `ON` condition, and the association's filters on it.
struct JoinedTable {
    let table: String
    let alias: String
    let condition: String
    let filters: [SQLExpression]

    /// `JOIN table AS alias ON condition AND (filter)…`, its filters' columns qualified with the alias.
    func render(required: Bool, into sql: inout String, _ arguments: inout [DatabaseValue]) {
        sql += required ? " JOIN " : " LEFT JOIN "
        sql += quoteIdentifier(table)
        if alias != table { sql += " AS " + quoteIdentifier(alias) }
        sql += " ON " + condition
        for filter in filters {
            sql += " AND ("
            filter.render(qualifier: alias, into: &sql, &arguments)
            sql += ")"
        }
    }
}

/// A join with the tables it adds, in order: one for a direct association, one per step for an association
/// through others. The last is the associated table.
struct ResolvedJoin {
    let part: JoinPart
    let tables: [JoinedTable]

    /// The alias of the associated table.
    var alias: String { tables[tables.count - 1].alias }
}

extension Query where Record: TableRecord {
    /// The rows with the rows of `association` joined; rows without one are left out. Nothing of the associated
    /// table is selected: filter on it with ``Association/filter(_:)``.
    ///
    /// ```swift
    /// let booksByPoets = try Book.joining(required: Book.author.filter(Column("genre") == "poetry")).fetchAll(db)
    /// ```
    public func joining<A: Association>(required association: A) -> Query where A.OriginRowDecoder == Record {
        join(JoinPart(association: association._sqlAssociation, required: true, decode: nil))
    }

    /// The rows with the rows of `association` joined when there are some (`LEFT JOIN`).
    public func joining<A: Association>(optional association: A) -> Query where A.OriginRowDecoder == Record {
        join(JoinPart(association: association._sqlAssociation, required: false, decode: nil))
    }

    /// The rows with their associated record, in one query (`JOIN`); rows without one are left out.
    ///
    /// Fetch them as a `Decodable` type with the record and a property named after the association's key:
    ///
    /// ```swift
    /// struct BookInfo: Decodable, FetchableRecord { var book: Book; var author: Author }
    /// let infos = try Book.including(required: Book.author).fetchAll(db) as [BookInfo]
    /// ```
    public func including<A: AssociationToOne>(required association: A) -> Query
    where A.OriginRowDecoder == Record, A.RowDecoder: Decodable & SendableMetatype {
        join(JoinPart(association: association._sqlAssociation, required: true, decode: decodeScope(A.RowDecoder.self)))
    }

    /// The rows with their associated record, or `nil` where there is none (`LEFT JOIN`), in one query.
    public func including<A: AssociationToOne>(optional association: A) -> Query
    where A.OriginRowDecoder == Record, A.RowDecoder: Decodable & SendableMetatype {
        join(
            JoinPart(association: association._sqlAssociation, required: false, decode: decodeScope(A.RowDecoder.self)))
    }

    /// The rows with the array of their associated records (empty where there is none), fetched with ONE more
    /// query per association whatever the number of rows: `WHERE foreignKey IN (SELECT key FROM <this query>)`.
    ///
    /// ```swift
    /// struct AuthorInfo: Decodable, FetchableRecord { var author: Author; var books: [Book] }
    /// let infos = try Author.including(all: Author.books).fetchAll(db) as [AuthorInfo]
    /// ```
    @inlinable
    public func including<A: AssociationToMany>(all association: A) -> Query
    where A.OriginRowDecoder == Record, A.RowDecoder: FetchableRecord {
        // Inlinable, so that the closure is compiled in the caller's module for the concrete child type: the
        // children's array and their grouping run specialized, not through generic code once per child.
        prefetching(association._sqlAssociation) { db, sql, arguments in
            // The children grouped by parent key as they are read, in their order: each goes straight into its
            // parent's array (no array of positions per parent, then copies of the children into new arrays).
            var integerGroups: [Int64: [A.RowDecoder]] = [:]
            var groups: [DatabaseValue: [A.RowDecoder]] = [:]
            try db.forEachRow(sql, arguments) { row in
                let column = row.count - 1
                if try row.isInteger(at: column) {
                    let key = try row.int64(at: column)
                    integerGroups[key, default: []].append(try A.RowDecoder(row: row))
                } else {
                    let key = try row.value(at: column)
                    // A child without a parent key has no parent (`IN` never matches NULL).
                    if key == .null { return }
                    groups[key, default: []].append(try A.RowDecoder(row: row))
                }
            }
            return Prefetched(
                integerGroups: integerGroups.mapValues { $0 as Any }, groups: groups.mapValues { $0 as Any },
                empty: [A.RowDecoder]())
        }
    }

    /// This request with one more prefetched association, read by `fetch`.
    @usableFromInline
    func prefetching(
        _ association: _SQLAssociation,
        _ fetch: @escaping @Sendable (Database, String, StatementArguments) throws -> Prefetched
    ) -> Query {
        var query = self
        query.prefetches.append(PrefetchPart(association: association, fetch: fetch))
        return query
    }

    private func join(_ part: JoinPart) -> Query {
        var query = self
        query.joins.append(part)
        return query
    }
}

/// Decodes a `T` from the columns of one joined table, or returns `nil` when they are all `NULL` (no row).
private func decodeScope<T: Decodable & SendableMetatype>(_ type: T.Type) -> @Sendable (Row, ColumnLookup) throws -> Any {
    { row, lookup in
        var allNull = true
        for (name, column) in lookup.index where name != "\u{0}" {
            if try !row.isNull(at: column) {
                allNull = false
                break
            }
        }
        if allNull { return NoAssociatedRecord() }
        return try T(from: RowDecoder(row: row, lookup: lookup))
    }
}

extension Query {
    /// The joins with their aliases and conditions; foreign keys looked up in the schema where not given.
    func resolveJoins(_ db: Database) throws -> [ResolvedJoin] {
        guard !joins.isEmpty else { return [] }
        // Aliases given with TableAlias are taken as they are; the others avoid them.
        var used: Set<String> = [table]
        for part in joins {
            guard let alias = part.association.alias else { continue }
            guard !used.contains(alias) else {
                throw DatabaseError(
                    .misuse, "the table alias '\(alias)' names two tables of one request: give each association "
                        + "its own TableAlias")
            }
            used.insert(alias)
        }
        var resolved: [ResolvedJoin] = []
        for part in joins {
            let tables = try joinedTables(
                part.association.chain[...], from: table, used: &used, alias: part.association.alias, db)
            resolved.append(ResolvedJoin(part: part, tables: tables))
        }
        return resolved
    }

    /// The tables that `chain` joins to the table aliased `origin`, each with an alias not in `used`; the last one
    /// `alias` when given.
    func joinedTables(
        _ chain: ArraySlice<_SQLAssociation>, from origin: String, used: inout Set<String>, alias given: String? = nil,
        _ db: Database
    ) throws -> [JoinedTable] {
        var previous = origin
        var tables: [JoinedTable] = []
        for (index, step) in zip(chain.indices, chain) {
            // A given alias is reserved in `used` by the caller.
            let alias = index == chain.indices.last ? given ?? uniqueAlias(step.destinationTable, &used)
                : uniqueAlias(step.destinationTable, &used)
            let (originColumn, destinationColumn) = try linkColumns(of: step, in: db)
            let condition =
                quoteIdentifier(alias) + "." + quoteIdentifier(destinationColumn) + " = " + quoteIdentifier(previous)
                + "." + quoteIdentifier(originColumn)
            tables.append(JoinedTable(table: step.destinationTable, alias: alias, condition: condition,
                                      filters: step.filters))
            previous = alias
        }
        return tables
    }

    /// `table`, or `table2`, `table3`… when the name is in `used`; added to `used`.
    func uniqueAlias(_ table: String, _ used: inout Set<String>) -> String {
        var alias = table
        var number = 2
        while used.contains(alias) {
            alias = table + "\(number)"
            number += 1
        }
        used.insert(alias)
        return alias
    }

    /// The column of a direct association's origin table and the column of its destination table that are equal.
    func linkColumns(of step: _SQLAssociation, in db: Database) throws -> (origin: String, destination: String) {
        let (child, parent) = try foreignKey(of: step, in: db)
        return step.kind == .belongsTo ? (child, parent) : (parent, child)
    }

    /// The foreign-key column of the child table and the column of the parent table it refers to.
    func foreignKey(of association: _SQLAssociation, in db: Database) throws -> (child: String, parent: String) {
        if let foreignKey = association.foreignKey {
            guard foreignKey.columns.count == 1, (foreignKey.destinationColumns?.count ?? 1) == 1 else {
                throw DatabaseError(
                    .misuse, "the association '\(association.key)' has a foreign key of several columns; "
                        + "associations support one column: join with SQL of your own")
            }
            return (foreignKey.columns[0], foreignKey.destinationColumns?[0] ?? association.parentPrimaryKey)
        }
        let keys = try db.fetch("PRAGMA foreign_key_list(\(quoteIdentifier(association.childTable)))") { row in
            (table: try row.string(at: 2), from: try row.string(at: 3), to: try row[4] as String?, id: try row.int(at: 0))
        }
        let matching = keys.filter { $0.table.lowercased() == association.parentTable.lowercased() }
        guard let first = matching.first else {
            throw DatabaseError(
                .misuse,
                "the association '\(association.key)' needs a foreign key from table '\(association.childTable)' to "
                    + "table '\(association.parentTable)', and there is none: declare it in the schema (REFERENCES) "
                    + "or give it with using: ForeignKey([\"column\"])")
        }
        guard matching.allSatisfy({ $0.id == first.id }) else {
            throw DatabaseError(
                .misuse,
                "table '\(association.childTable)' has several foreign keys to table '\(association.parentTable)': "
                    + "choose one for the association '\(association.key)' with using: ForeignKey([\"column\"])")
        }
        guard matching.count == 1 else {
            throw DatabaseError(
                .misuse, "the foreign key from '\(association.childTable)' to '\(association.parentTable)' has "
                    + "several columns; associations support one column: join with SQL of your own")
        }
        return (first.from, first.to ?? association.parentPrimaryKey)
    }

    /// Fetches the rows with their included associations, decoded through `Decodable`: first one query per
    /// `including(all:)`, then the rows themselves, joined with their `including(required:/optional:)` records.
    func fetchAssociated<T: Decodable>(_ db: Database, single: Bool) throws -> [T] {
        let (query, resolved) = try (single ? limit(1, offset: offset) : self).prepared(db)
        // The parent key of each prefetched association, selected after every other column.
        var prefetchedKeys: [SQLSelection] = []
        var prefetched: [(key: String, values: Prefetched)] = []
        for (index, part) in prefetches.enumerated() {
            let association = part.association
            // The children are read from the first step's table, joined to the others (an association through
            // others), and matched to their parent by the first step's column.
            let chain = association.chain
            let (originColumn, firstColumn) = try linkColumns(of: chain[0], in: db)
            let parentKey = SQLSelection(expression: Column(originColumn).sqlExpression, alias: nil)
            prefetchedKeys.append(SQLSelection(expression: Column(originColumn).sqlExpression,
                                               alias: "securestore_prefetch_\(index)"))
            let first = chain[0].destinationTable
            var used: Set<String> = [first]
            let joined = try joinedTables(chain.dropFirst(), from: first, used: &used, db)
            let child = quoteIdentifier(joined.last?.alias ?? first)
            let childKey = "\(quoteIdentifier(first)).\(quoteIdentifier(firstColumn))"
            var sql = "SELECT \(child).*, \(childKey) FROM \(quoteIdentifier(first))"
            var arguments: [DatabaseValue] = []
            for table in joined { table.render(required: true, into: &sql, &arguments) }
            var conjunction = " WHERE "
            // A request for every row of its table reads the children in one scan of their table: the children of
            // rows it does not return cannot exist but for a foreign key left unchecked, and are dropped when the
            // rows are matched. Any other request names its rows (walking the foreign-key index: measured 1.1–1.2×
            // slower for all rows, Docs/records.md, and far faster for a few).
            if !query.selectsEveryRow {
                let (parents, parentArguments) = query.sql(selecting: [parentKey], resolved: resolved)
                sql += " WHERE \(childKey) IN (\(parents))"
                arguments += parentArguments
                conjunction = " AND "
            }
            for filter in chain[0].filters {
                sql += conjunction + "("
                filter.render(qualifier: first, into: &sql, &arguments)
                sql += ")"
                conjunction = " AND "
            }
            let orderings = chain[chain.count - 1].orderings
            if !orderings.isEmpty {
                sql += " ORDER BY "
                for (index, ordering) in orderings.enumerated() {
                    if index > 0 { sql += ", " }
                    ordering.render(qualifier: joined.last?.alias ?? first, into: &sql, &arguments)
                }
            }
            prefetched.append((association.key, try part.fetch(db, sql, StatementArguments(values: arguments))))
        }
        let (sql, arguments) = query.sql(extraColumns: prefetchedKeys, resolved: resolved)
        // The number of columns of each table selected with `*`, to find where each one's columns start.
        var baseCount = 0
        for column in selection.isEmpty ? [.allColumns] : selection {
            baseCount += column.isAllColumns ? try db.columnCount(ofTable: table) : 1
        }
        var scopes: [(key: String, range: Range<Int>, decode: @Sendable (Row, ColumnLookup) throws -> Any)] = []
        var start = baseCount
        for join in resolved {
            guard let decode = join.part.decode else { continue }
            let count = try db.columnCount(ofTable: join.part.association.destinationTable)
            scopes.append((join.part.association.key, start..<(start + count), decode))
            start += count
        }
        let prefetchStart = start
        var lookups: (base: ColumnLookup, scopes: [ColumnLookup])?
        return try db.fetch(sql, StatementArguments(values: arguments)) { row in
            if lookups == nil {
                let names = row.statement.columnNames
                func lookup(_ range: Range<Int>) -> ColumnLookup {
                    // Names outside the range are replaced by one that no key can be, so indexes stay absolute.
                    ColumnLookup(names: names.indices.map { range.contains($0) ? names[$0] : "\u{0}" })
                }
                lookups = (lookup(0..<baseCount), scopes.map { lookup($0.range) })
            }
            let (base, scopeLookups) = lookups!
            let associated = AssociatedValues()
            for (index, scope) in scopes.enumerated() {
                associated.values[scope.key] = try scope.decode(row, scopeLookups[index])
            }
            for (index, (key, values)) in prefetched.enumerated() {
                associated.values[key] = try values.children(of: row, at: prefetchStart + index)
            }
            base.associated = associated
            return try T(from: RowDecoder(row: row, lookup: base))
        }
    }
}

extension Query {
    /// Whether the request returns every row of its table (no filter, grouping, limit, offset or required join).
    var selectsEveryRow: Bool {
        filters.isEmpty && groups.isEmpty && havings.isEmpty && limit == nil && offset == nil
            && !joins.contains { $0.required }
    }
}

/// The associated records of one row, by association key, for the decoder of the row's record.
final class AssociatedValues {
    var values = AssociatedList()
}

/// Values by association key: a few keys (one per association of the request), so a list searched in order,
/// not a dictionary hashing each key on every row (a request with associations decodes its rows through it).
struct AssociatedList {
    private var keys: [String] = []
    private var values: [Any] = []

    subscript(key: String) -> Any? {
        get {
            for index in keys.indices where keys[index] == key { return values[index] }
            return nil
        }
        set {
            if let index = keys.firstIndex(of: key) {
                if let newValue { values[index] = newValue } else {
                    keys.remove(at: index)
                    values.remove(at: index)
                }
            } else if let newValue {
                keys.append(key)
                values.append(newValue)
            }
        }
    }
}

/// The value of an optional association (`including(optional:)`) where the row has no associated record.
struct NoAssociatedRecord {}

extension SQLSelection {
    var isAllColumns: Bool {
        if alias == nil, expression.pieces.count == 1, case .sql("*") = expression.pieces[0] { return true }
        return false
    }
}

extension Database {
    /// The number of columns of `table` (`PRAGMA table_info`).
    func columnCount(ofTable table: String) throws -> Int {
        var count = 0
        try forEachRow("PRAGMA table_info(\(quoteIdentifier(table)))") { _ in count += 1 }
        guard count > 0 else {
            throw DatabaseError(.misuse, "no table named '\(table)' (from a record type's databaseTableName)")
        }
        return count
    }
}
