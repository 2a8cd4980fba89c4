// Preferences module.
