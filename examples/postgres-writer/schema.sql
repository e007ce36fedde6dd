-- The table the sample PostgresWriter writes to (the plugin does not create tables: a DBA owns
-- the schema). `id` is `<namespace>/<name>` of the object.
CREATE TABLE IF NOT EXISTS students (
    id      text PRIMARY KEY,
    name    text NOT NULL,
    age     integer NOT NULL CHECK (age >= 0),
    country text NOT NULL
);
