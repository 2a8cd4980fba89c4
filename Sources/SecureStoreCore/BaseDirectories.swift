// Where an app's files go: the XDG Base Directory rules, in one place.
internal import Glibc

/// An XDG base directory.
package enum BaseDirectory: Sendable {
    /// `$XDG_DATA_HOME`, or `~/.local/share`.
    case data
    /// `$XDG_CONFIG_HOME`, or `~/.config`.
    case config

    /// The environment variable that names it.
    package var variable: String {
        switch self {
        case .data: "XDG_DATA_HOME"
        case .config: "XDG_CONFIG_HOME"
        }
    }

    /// Its place under the home directory when the variable is unset, empty or not absolute.
    package var fallback: String {
        switch self {
        case .data: ".local/share"
        case .config: ".config"
        }
    }

    /// The directory's path: the variable when it holds an absolute path (the spec says a relative one is
    /// ignored), else the fallback under `$HOME` when that is absolute, else under the home directory of the
    /// password database (`getpwuid`, for a process started without `HOME`). nil when there is none.
    package func path(environment: [String: String]) -> String? {
        if let value = environment[variable], value.hasPrefix("/") { return value }
        if let home = environment["HOME"], home.hasPrefix("/") { return home + "/" + fallback }
        if let entry = getpwuid(getuid()), let directory = entry.pointee.pw_dir, directory.pointee == 0x2F {
            return String(cString: directory) + "/" + fallback
        }
        return nil
    }
}
