// Shell completion generated from the command tree: `securestore completion bash|zsh|fish` prints a script that
// knows every command and option the parser knows, because it is written from the same `Command` values. The
// scripts walk the words typed so far the way the parser does (options anywhere, `--` ends them, an option with a
// value takes the next word) and ask the tool itself, through the hidden `__complete` command, for task ID prefixes,
// attachment ID prefixes, token names and preference keys: never a secret (nor a preference's value), and nothing at
// all when the keyring or the database is unavailable. What an option's value or an argument completes to (fixed
// words, files, directories, asked words) is the ``CompletionKind`` its spec declares, never guessed from a name.
internal import Foundation
internal import Keychain
internal import Preferences
internal import SecureStore
internal import SecureStoreCore
internal import Tasks

/// What the value of `option` completes to (its spec says), or nil for free text and for flags.
func completion(ofOption option: any CommandOption) -> CompletionKind? {
    option.spec.valueName == nil ? nil : option.spec.completion
}

/// One command of the tree, flattened: its path and what can follow it.
struct CompletionNode: Sendable {
    let path: [String]
    let command: Command

    var key: String { path.joined(separator: " ") }
    var subcommands: [Command] { command.subcommands.filter { !$0.hidden } }
    var options: [OptionSpec] { command.options.map(\.spec) }

    /// What `argument` of this command completes to (its spec says), or nil for free text.
    func completion(ofArgument argument: any CommandArgument) -> CompletionKind? { argument.spec.completion }
}

/// Every visible command under `root`, depth first, the root itself first (path []).
func completionNodes(_ root: Command) -> [CompletionNode] {
    var nodes: [CompletionNode] = []
    func walk(_ command: Command, _ path: [String]) {
        nodes.append(CompletionNode(path: path, command: command))
        for sub in command.subcommands where !sub.hidden { walk(sub, path + [sub.name]) }
    }
    walk(root, [])
    return nodes
}

/// The options whose values the scripts pass on to `__complete`, so that it looks where the command would.
private let contextOptions = ["--app", "--data-dir", "--name"]

/// Text in single quotes for a POSIX shell (bash, zsh): `'` becomes `'\''`.
private func shellQuoted(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

/// Text in single quotes for fish, where a backslash escapes inside single quotes too.
private func fishQuoted(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
}

/// The shells the tool writes a completion script for.
enum Shell: String, CaseIterable, Sendable {
    case bash, zsh, fish
}

/// Shell completion scripts for the tool.
enum CompletionScript {
    /// The script for `shell`.
    static func script(for shell: Shell, root: Command) -> String {
        switch shell {
        case .bash: bash(root)
        case .zsh: zsh(root)
        case .fish: fish(root)
        }
    }

    private static func optionWords(_ specs: [OptionSpec]) -> [String] {
        specs.flatMap { spec in (spec.short.map { ["-\($0)"] } ?? []) + ["--\(spec.name)"] }
    }

    /// `case` arms shared by bash and zsh: the value-taking options, what their values complete to, and the kinds of
    /// the arguments.
    private static func posixTables(_ nodes: [CompletionNode]) -> (takesValue: [String], values: [String], arguments: [String]) {
        var takesValue = globalOptionSpecs.filter { $0.valueName != nil }.map { "*" + shellQuoted("|--\($0.name)") }
        var values = globalOptionSpecs.compactMap { spec in
            completion(ofOption: spec).map { "*" + shellQuoted("|--\(spec.name)") + ") REPLY=\(shellQuoted($0.scriptWord)) ;;" }
        }
        var arguments: [String] = []
        for node in nodes {
            for spec in node.options where spec.valueName != nil {
                takesValue.append(shellQuoted("\(node.key)|--\(spec.name)"))
            }
            for option in node.command.options {
                guard let kind = completion(ofOption: option) else { continue }
                values.append(shellQuoted("\(node.key)|--\(option.spec.name)") + ") REPLY=\(shellQuoted(kind.scriptWord)) ;;")
            }
            for (index, argument) in node.command.arguments.enumerated() {
                guard let kind = node.completion(ofArgument: argument) else { continue }
                let pattern = argument.variadic ? shellQuoted("\(node.key)|") + "*" : shellQuoted("\(node.key)|\(index)")
                arguments.append("\(pattern)) REPLY=\(shellQuoted(kind.scriptWord)) ;;")
            }
        }
        return (takesValue, values, arguments)
    }

    // MARK: bash

    static func bash(_ root: Command) -> String {
        let nodes = completionNodes(root)
        let (takesValue, values, arguments) = posixTables(nodes)
        let globals = optionWords(globalOptionSpecs).joined(separator: " ")
        var lines = [
            "# bash completion for securestore. Generated by 'securestore completion bash' from the tool's command tree;",
            "# regenerate it rather than edit it. Load it with: source <(securestore completion bash)",
            "",
            "# The subcommands of the command at path $1, in REPLY.",
            "_securestore_subcommands() {",
            "    case \"$1\" in",
        ]
        for node in nodes where !node.subcommands.isEmpty {
            lines.append("    \(shellQuoted(node.key))) REPLY=\(shellQuoted(node.subcommands.map(\.name).joined(separator: " "))) ;;")
        }
        lines += [
            "    *) REPLY='' ;;",
            "    esac",
            "}",
            "",
            "# The options of the command at path $1, global ones included, in REPLY.",
            "_securestore_options() {",
            "    case \"$1\" in",
        ]
        for node in nodes where !node.options.isEmpty {
            lines.append("    \(shellQuoted(node.key))) REPLY=\(shellQuoted(optionWords(node.options).joined(separator: " "))) ;;")
        }
        lines += [
            "    *) REPLY='' ;;",
            "    esac",
            "    REPLY=\"${REPLY:+$REPLY }\(globals)\"",
            "}",
            "",
            "# Whether option $2 of the command at path $1 takes a value.",
            "_securestore_takes_value() {",
            "    case \"$1|$2\" in",
            "    " + takesValue.joined(separator: " | ") + ") return 0 ;;",
            "    esac",
            "    return 1",
            "}",
            "",
            "# What the value of option $2 of the command at path $1 completes to, in REPLY: files, directories,",
            "# 'words W1 W2…' or ''.",
            "_securestore_option_value() {",
            "    case \"$1|$2\" in",
        ]
        lines += values.map { "    " + $0 }
        lines += [
            "    *) REPLY='' ;;",
            "    esac",
            "}",
            "",
            "# What argument $2 (from 0) of the command at path $1 completes to, in REPLY: \(argumentKinds) or ''.",
            "_securestore_argument() {",
            "    case \"$1|$2\" in",
        ]
        lines += arguments.map { "    " + $0 }
        lines += [
            "    *) REPLY='' ;;",
            "    esac",
            "}",
            "",
            "# Offers the words of kind $1 (\(argumentKinds)) that begin with $cur, in COMPREPLY; $program and",
            "# $context are those of _securestore.",
            "_securestore_offer() {",
            "    case \"$1\" in",
            "    directories) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- \"$cur\")) ;;",
            "    files) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- \"$cur\")) ;;",
            "    words\\ *) COMPREPLY=($(compgen -W \"${1#words }\" -- \"$cur\")) ;;",
            "    \(AskedWords.allCases.map(\.rawValue).joined(separator: "|")))",
            "        # Asked of the tool; no prompt, no error output, nothing when the keyring or database is unavailable.",
            "        # Words are compared, never expanded (compgen -W would expand them).",
            "        local line",
            "        while IFS= read -r line; do",
            "            [[ -n $line && $line == \"$cur\"* ]] && COMPREPLY+=(\"$line\")",
            "        done < <(SECURESTORE_PROMPT=never \"$program\" __complete \"$1\" \"${context[@]}\" 2>/dev/null </dev/null)",
            "        ;;",
            "    esac",
            "}",
            "",
            "_securestore() {",
            "    local program=\"${1:-securestore}\" cur=\"${COMP_WORDS[COMP_CWORD]}\" cmdpath='' word name pending=''",
            "    local -i i skip=0 only_args=0 count=0",
            "    local -a context=()",
            "    local REPLY",
            "    COMPREPLY=()",
            "    for ((i = 1; i < COMP_CWORD; i++)); do",
            "        word=\"${COMP_WORDS[i]}\"",
            "        if ((skip)); then",
            "            [[ $word == = ]] && continue   # --opt=value split at '=' by COMP_WORDBREAKS",
            "            skip=0",
            "            case \"$pending\" in \(contextOptions.joined(separator: "|"))) context+=(\"$pending\" \"$word\") ;; esac",
            "            continue",
            "        fi",
            "        if ((!only_args)); then",
            "            case \"$word\" in",
            "            --) only_args=1; continue ;;",
            "            -?*)",
            "                name=\"${word%%=*}\"",
            "                if [[ $word != *=* ]] && _securestore_takes_value \"$cmdpath\" \"$name\"; then",
            "                    skip=1 pending=\"$name\"",
            "                elif [[ $word == *=* ]]; then",
            "                    case \"$name\" in \(contextOptions.joined(separator: "|"))) context+=(\"$word\") ;; esac",
            "                fi",
            "                continue ;;",
            "            esac",
            "        fi",
            "        _securestore_subcommands \"$cmdpath\"",
            "        if ((count == 0)) && [[ -n $REPLY && \" $REPLY \" == *\" $word \"* ]]; then",
            "            cmdpath=\"${cmdpath:+$cmdpath }$word\"",
            "        else",
            "            count+=1",
            "        fi",
            "    done",
            "    if ((skip)); then",
            "        [[ $cur == = ]] && cur=''   # --opt= split at '='",
            "        _securestore_option_value \"$cmdpath\" \"$pending\"",
            "        _securestore_offer \"$REPLY\"",
            "        return 0",
            "    fi",
            "    if ((!only_args)) && [[ $cur == -* ]]; then",
            "        _securestore_options \"$cmdpath\"",
            "        COMPREPLY=($(compgen -W \"$REPLY\" -- \"$cur\"))",
            "        return 0",
            "    fi",
            "    _securestore_subcommands \"$cmdpath\"",
            "    if [[ -n $REPLY ]] && ((count == 0)); then",
            "        COMPREPLY=($(compgen -W \"$REPLY\" -- \"$cur\"))",
            "        return 0",
            "    fi",
            "    _securestore_argument \"$cmdpath\" \"$count\"",
            "    _securestore_offer \"$REPLY\"",
            "    return 0",
            "}",
            "",
            "complete -F _securestore securestore",
        ]
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: zsh

    /// `name:description` for `_describe`, with the colons in the name escaped.
    private static func described(_ name: String, _ help: String) -> String {
        shellQuoted(name.replacingOccurrences(of: ":", with: "\\:") + ":" + help)
    }

    static func zsh(_ root: Command) -> String {
        let nodes = completionNodes(root)
        let (takesValue, values, arguments) = posixTables(nodes)
        func optionEntries(_ specs: [OptionSpec]) -> [String] {
            specs.flatMap { spec in
                (spec.short.map { [described("-\($0)", spec.help)] } ?? []) + [described("--\(spec.name)", spec.help)]
            }
        }
        var lines = [
            "#compdef securestore",
            "# zsh completion for securestore. Generated by 'securestore completion zsh' from the tool's command tree;",
            "# regenerate it rather than edit it. Install it as _securestore in a directory of $fpath.",
            "",
            "# The subcommands of the command at path $1, as name:description, in reply.",
            "_securestore_subcommands() {",
            "    case \"$1\" in",
        ]
        for node in nodes where !node.subcommands.isEmpty {
            let entries = node.subcommands.map { described($0.name, $0.abstract) }
            lines.append("    \(shellQuoted(node.key))) reply=(\(entries.joined(separator: " "))) ;;")
        }
        lines += [
            "    *) reply=() ;;",
            "    esac",
            "}",
            "",
            "# The options of the command at path $1, global ones included, as name:description, in reply.",
            "_securestore_options() {",
            "    case \"$1\" in",
        ]
        for node in nodes where !node.options.isEmpty {
            lines.append("    \(shellQuoted(node.key))) reply=(\(optionEntries(node.options).joined(separator: " "))) ;;")
        }
        lines += [
            "    *) reply=() ;;",
            "    esac",
            "    reply+=(\(optionEntries(globalOptionSpecs).joined(separator: " ")))",
            "}",
            "",
            "# Whether option $2 of the command at path $1 takes a value.",
            "_securestore_takes_value() {",
            "    case \"$1|$2\" in",
            "    (" + takesValue.joined(separator: " | ") + ") return 0 ;;",
            "    esac",
            "    return 1",
            "}",
            "",
            "# What the value of option $2 of the command at path $1 completes to, in REPLY: files, directories,",
            "# 'words W1 W2…' or ''.",
            "_securestore_option_value() {",
            "    case \"$1|$2\" in",
        ]
        lines += values.map { "    (" + $0 }
        lines += [
            "    (*) REPLY='' ;;",
            "    esac",
            "}",
            "",
            "# What argument $2 (from 0) of the command at path $1 completes to, in REPLY: \(argumentKinds) or ''.",
            "_securestore_argument() {",
            "    case \"$1|$2\" in",
        ]
        lines += arguments.map { "    (" + $0 }
        lines += [
            "    (*) REPLY='' ;;",
            "    esac",
            "}",
            "",
            "# Offers the words of kind $1 (\(argumentKinds)); $program and $context are those of _securestore.",
            "_securestore_offer() {",
            "    case \"$1\" in",
            "    (directories) _files -/ ;;",
            "    (files) _files ;;",
            "    (words\\ *) compadd -- ${=1#words } ;;",
            "    (\(AskedWords.allCases.map(\.rawValue).joined(separator: "|")))",
            "        # Asked of the tool; no prompt, no error output, nothing when the keyring or database is unavailable.",
            "        compadd -Q -- ${(f)\"$(SECURESTORE_PROMPT=never \"$program\" __complete \"$1\" \"${context[@]}\" 2>/dev/null </dev/null)\"}",
            "        ;;",
            "    esac",
            "}",
            "",
            "_securestore() {",
            "    local program=\"${words[1]}\" cur=\"${words[CURRENT]}\" cmdpath='' word name pending='' REPLY",
            "    local -i i skip=0 only_args=0 count=0",
            "    local -a context reply names",
            "    for ((i = 2; i < CURRENT; i++)); do",
            "        word=\"${words[i]}\"",
            "        if ((skip)); then",
            "            skip=0",
            "            case \"$pending\" in (\(contextOptions.joined(separator: "|"))) context+=(\"$pending\" \"$word\") ;; esac",
            "            continue",
            "        fi",
            "        if ((!only_args)); then",
            "            case \"$word\" in",
            "            (--) only_args=1; continue ;;",
            "            (-?*)",
            "                name=\"${word%%=*}\"",
            "                if [[ $word != *=* ]] && _securestore_takes_value \"$cmdpath\" \"$name\"; then",
            "                    skip=1 pending=\"$name\"",
            "                elif [[ $word == *=* ]]; then",
            "                    case \"$name\" in (\(contextOptions.joined(separator: "|"))) context+=(\"$word\") ;; esac",
            "                fi",
            "                continue ;;",
            "            esac",
            "        fi",
            "        _securestore_subcommands \"$cmdpath\"",
            "        names=(\"${(@)reply%%:*}\")",
            "        if ((count == 0 && ${names[(Ie)$word]})); then",
            "            cmdpath=\"${cmdpath:+$cmdpath }$word\"",
            "        else",
            "            count+=1",
            "        fi",
            "    done",
            "    if ((skip)); then",
            "        _securestore_option_value \"$cmdpath\" \"$pending\"",
            "        _securestore_offer \"$REPLY\"",
            "        return 0",
            "    fi",
            "    if ((!only_args)) && [[ $cur == -* ]]; then",
            "        _securestore_options \"$cmdpath\"",
            "        _describe -t options 'option' reply",
            "        return",
            "    fi",
            "    _securestore_subcommands \"$cmdpath\"",
            "    if ((${#reply} && count == 0)); then",
            "        _describe -t commands 'securestore command' reply",
            "        return",
            "    fi",
            "    _securestore_argument \"$cmdpath\" \"$count\"",
            "    _securestore_offer \"$REPLY\"",
            "}",
            "",
            "_securestore \"$@\"",
        ]
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: fish

    static func fish(_ root: Command) -> String {
        let nodes = completionNodes(root)
        var lines = [
            "# fish completion for securestore. Generated by 'securestore completion fish' from the tool's command tree;",
            "# regenerate it rather than edit it. Install it as securestore.fish in a directory of $fish_complete_path.",
            "",
            "function __securestore_subcommands --description 'securestore: the subcommands of the command at path $argv[1]'",
            "    switch \"$argv[1]\"",
        ]
        for node in nodes where !node.subcommands.isEmpty {
            lines.append("        case \(fishQuoted(node.key))")
            lines.append("            printf '%s\\n' " + node.subcommands.map { fishQuoted($0.name) }.joined(separator: " "))
        }
        lines += [
            "    end",
            "end",
            "",
            "function __securestore_takes_value --description 'securestore: whether option $argv[2] of the command at $argv[1] takes a value'",
            "    switch \"$argv[1]|$argv[2]\"",
        ]
        var patterns = globalOptionSpecs.filter { $0.valueName != nil }.map { fishQuoted("*|--\($0.name)") }
        var argumentArms: [String] = []
        for node in nodes {
            patterns += node.options.filter { $0.valueName != nil }.map { fishQuoted("\(node.key)|--\($0.name)") }
            for (index, argument) in node.command.arguments.enumerated() {
                guard let kind = node.completion(ofArgument: argument) else { continue }
                argumentArms.append("        case " + fishQuoted("\(node.key)|" + (argument.variadic ? "*" : "\(index)")))
                argumentArms.append("            echo \(fishQuoted(kind.scriptWord))")
            }
        }
        lines += [
            "        case " + patterns.joined(separator: " "),
            "            return 0",
            "    end",
            "    return 1",
            "end",
            "",
            "function __securestore_argument --description 'securestore: what argument $argv[2] of the command at $argv[1] completes to'",
            "    switch \"$argv[1]|$argv[2]\"",
        ]
        lines += argumentArms
        lines += [
            "    end",
            "end",
            "",
            "# Walks the words before the cursor as the parser does: sets __securestore_path, _count (arguments so far),",
            "# _skip (1 when the word under the cursor is an option's value), _pending (that option), _context.",
            "function __securestore_walk",
            "    set -l tokens (commandline -opc)",
            "    set -e tokens[1]",
            "    set -g __securestore_path ''",
            "    set -g __securestore_count 0",
            "    set -g __securestore_skip 0",
            "    set -g __securestore_pending ''",
            "    set -g __securestore_context",
            "    set -l only_args 0",
            "    for word in $tokens",
            "        if test $__securestore_skip = 1",
            "            set __securestore_skip 0",
            "            if contains -- $__securestore_pending \(contextOptions.joined(separator: " "))",
            "                set -a __securestore_context $__securestore_pending $word",
            "            end",
            "            continue",
            "        end",
            "        if test $only_args = 0",
            "            if test \"$word\" = --",
            "                set only_args 1",
            "                continue",
            "            end",
            "            # A regular expression, not the glob '-?*': fish 4 no longer takes '?' as a wildcard (qmark-noglob).",
            "            if string match -qr -- '^-.' $word",
            "                set -l name (string split -m1 = -- $word)[1]",
            "                if not string match -q -- '*=*' $word; and __securestore_takes_value \"$__securestore_path\" $name",
            "                    set __securestore_skip 1",
            "                    set __securestore_pending $name",
            "                else if contains -- $name \(contextOptions.joined(separator: " "))",
            "                    set -a __securestore_context $word",
            "                end",
            "                continue",
            "            end",
            "        end",
            "        if test $__securestore_count = 0; and contains -- $word (__securestore_subcommands \"$__securestore_path\")",
            "            set __securestore_path (string trim -- \"$__securestore_path $word\")",
            "        else",
            "            set __securestore_count (math $__securestore_count + 1)",
            "        end",
            "    end",
            "end",
            "",
            "function __securestore_at --description 'securestore: whether the cursor is in the command at path $argv[1]'",
            "    __securestore_walk",
            "    test $__securestore_skip = 0; and test \"$__securestore_path\" = \"$argv[1]\"",
            "end",
            "",
            "function __securestore_in --description 'securestore: whether the words before the cursor are in the command at path $argv[1]'",
            "    __securestore_walk",
            "    test \"$__securestore_path\" = \"$argv[1]\"",
            "end",
            "",
            "function __securestore_needs_command --description 'securestore: whether a subcommand of $argv[1] comes next'",
            "    __securestore_at $argv[1]; and test $__securestore_count = 0",
            "end",
            "",
            "function __securestore_argument_is --description 'securestore: whether the word under the cursor is an argument of kind $argv[1]'",
            "    __securestore_walk",
            "    test $__securestore_skip = 0",
            "    and test \"$(__securestore_argument \"$__securestore_path\" $__securestore_count)\" = \"$argv[1]\"",
            "end",
            "",
            "function __securestore_argument_words --description 'securestore: the fixed words the argument under the cursor takes'",
            "    __securestore_walk",
            "    test $__securestore_skip = 0; or return",
            "    set -l kind (__securestore_argument \"$__securestore_path\" $__securestore_count)",
            "    string match -q -- 'words *' \"$kind\"; or return",
            "    string split ' ' -- (string replace -- 'words ' '' \"$kind\")",
            "end",
            "",
            "# Asked of the tool: no prompt, no error output, nothing when the keyring or the database is unavailable.",
            "function __securestore_dynamic --description 'securestore: task or attachment ID prefixes, token names or preference keys'",
            "    __securestore_walk",
            "    set -l program (commandline -opc)[1]",
            "    SECURESTORE_PROMPT=never $program __complete $argv[1] $__securestore_context 2>/dev/null </dev/null",
            "end",
            "",
            "complete -c securestore -f",
        ]
        for spec in globalOptionSpecs {
            var line = "complete -c securestore"
            if let short = spec.short { line += " -s \(short)" }
            line += " -l \(spec.name)"
            if spec.valueName != nil { line += fishValue(completion(ofOption: spec)) }
            lines.append(line + " -d " + fishQuoted(spec.help))
        }
        for node in nodes {
            let condition = fishQuoted("__securestore_needs_command " + shellQuoted(node.key))
            for sub in node.subcommands {
                lines.append("complete -c securestore -n \(condition) -a \(fishQuoted(sub.name)) -d \(fishQuoted(sub.abstract))")
            }
            let at = fishQuoted("__securestore_at " + shellQuoted(node.key))
            // An option that takes a value is offered where the path is (the walk marks the word after it as its
            // value), so that fish also completes that value.
            let within = fishQuoted("__securestore_in " + shellQuoted(node.key))
            for option in node.command.options {
                let spec = option.spec
                var line = "complete -c securestore -n \(spec.valueName == nil ? at : within)"
                if let short = spec.short { line += " -s \(short)" }
                line += " -l \(spec.name)"
                if spec.valueName != nil { line += fishValue(completion(ofOption: option)) }
                lines.append(line + " -d " + fishQuoted(spec.help))
            }
        }
        for kind in AskedWords.allCases {
            lines.append(
                "complete -c securestore -n '__securestore_argument_is \(kind.rawValue)' -a '(__securestore_dynamic \(kind.rawValue))'")
        }
        lines.append("complete -c securestore -n '__securestore_argument_is files' -F")
        lines.append("complete -c securestore -n '__securestore_argument_is directories' -x -a '(__fish_complete_directories)'")
        lines.append("complete -c securestore -a '(__securestore_argument_words)'")
        return lines.joined(separator: "\n") + "\n"
    }
}

/// The kinds of words, for the scripts' comments.
private let argumentKinds = (["files", "directories", "'words W1 W2…'"] + AskedWords.allCases.map(\.rawValue)).joined(separator: ", ")

/// The part of a fish `complete` line that says what an option's value completes to (`-x`: a value, no files).
private func fishValue(_ kind: CompletionKind?) -> String {
    switch kind {
    case .files: " -r -F"
    case .directories: " -x -a '(__fish_complete_directories)'"
    case .words(let words): " -x -a " + fishQuoted(words.joined(separator: " "))
    case .asked(let kind): " -x -a " + fishQuoted("(__securestore_dynamic \(kind.rawValue))")
    case nil: " -x"
    }
}

/// Whether `word` may be offered by a completion script: printable ASCII with no whitespace, quote, `$`,
/// backquote, backslash or glob character, so that no shell can expand it into something else.
func isSafeCompletionWord(_ word: String) -> Bool {
    !word.isEmpty && word.utf8.count <= 256
        && word.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || "._-+@%,:=/^~".unicodeScalars.contains(scalar))
        }
}

private let shellArgument = Argument(
    "SHELL", help: "bash, zsh or fish.", completion: .words(Shell.allCases.map(\.rawValue)),
    value: .oneOf(Shell.allCases) { shell in
        "unknown shell \(UsageError.quoted(shell)) (expected one of: \(Shell.allCases.map(\.rawValue).joined(separator: ", ")))"
    })

/// `securestore completion bash|zsh|fish`: prints the completion script.
let completionCommand = Command(
    name: "completion", abstract: "Print the shell completion script for bash, zsh or fish.",
    discussion: """
        The script is generated from the tool's command tree, so it always knows every command and option.
        bash: source <(securestore completion bash), or save it as ~/.local/share/bash-completion/completions/securestore.
        zsh: save it as _securestore in a directory of $fpath. fish: save it as ~/.config/fish/completions/securestore.fish.
        'make install' installs all three. Task IDs and token names are completed by asking the tool (never a secret).
        """,
    arguments: [shellArgument],
    run: { invocation in
        Console.out(CompletionScript.script(for: try invocation[shellArgument], root: root))
        return ExitStatus.success
    })

private let kindArgument = Argument("KIND", help: "task-ids, token-names, attachment-ids or preference-keys.")

/// `securestore __complete task-ids|token-names|attachment-ids|preference-keys`: the words the completion scripts offer, one a line. Hidden.
/// Fails silently: no output and status 0 when the keyring or the database is unavailable, so that a shell never
/// shows an error in the middle of a line. It never prompts (the scripts also set SECURESTORE_PROMPT=never) and
/// never creates anything.
let completeCommand = Command(
    name: "__complete", abstract: "Words for the completion scripts.",
    arguments: [kindArgument],
    options: [nameOption],
    hidden: true,
    run: { invocation in
        var words: [String] = []
        do {
            // An unknown kind is no usage error: the scripts see nothing, as when the keyring is unavailable.
            switch AskedWords(rawValue: try invocation[kindArgument]) {
            case .taskIDs:
                let context = try Context(invocation, allowsPrompts: false)
                let database = try openDatabase(invocation, context)
                defer { try? database.close() }
                let tasks = try TaskList(database: database, createIfMissing: false)
                words = try tasks.page(limit: 500).items.map { String($0.id.uuidString.lowercased().prefix(8)) }
            case .tokenNames:
                let context = try Context(invocation, allowsPrompts: false)
                // Names only: items(service:) reads attributes and labels, never a secret.
                words = try context.keychain.items(service: context.paths.tokenService).map(\.account)
            case .attachmentIDs:
                let context = try Context(invocation, allowsPrompts: false)
                let database = try openDatabase(invocation, context)
                defer { try? database.close() }
                let store = database.attachmentStore()
                defer { try? store.close() }
                words = try store.newest(limit: 500).map { String($0.hexID.prefix(8)) }
            case .preferenceKeys:
                // Keys only, never a value; no file, no directory is made when there are no preferences.
                let context = try Context(invocation, allowsPrompts: false)
                let location = try PreferencesLocation(directory: context.paths.configDirectory)
                guard fileExists(location.fileURL.path, followingLinks: true) else { break }
                words = try Preferences(location: location).storedValues.keys.sorted()
            default:
                break
            }
        } catch {
            return ExitStatus.success
        }
        let safe = words.filter(isSafeCompletionWord)
        if !safe.isEmpty { Console.out(safe.joined(separator: "\n") + "\n") }
        return ExitStatus.success
    })
