// The translation unit the shared precompiled header (Asio, Beast) is built with.
