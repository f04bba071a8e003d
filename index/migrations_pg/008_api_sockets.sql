-- A bind may also put the session's API socket into its namespace: where
-- (api_socket, '' for none) and the identity of the socket file made there
-- (api_socket_id, "dev:ino"), by which a restart replaces only its own.
ALTER TABLE session_binds ADD COLUMN api_socket TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE session_binds ADD COLUMN api_socket_id TEXT NOT NULL DEFAULT '';
