// A PostgreSQL server of a test's own: initdb into a fresh directory and the server listening on
// a Unix socket there only (no TCP port to collide on), stopped and removed with this object.
// Run as root (as CI runs), the cluster belongs to the `postgres` user and the server runs as it
// (PostgreSQL refuses root). Its programs come from Debian's postgresql package
// (/usr/lib/postgresql/VERSION/bin, the newest there) and postgresql-client (pg_isready,
// createdb).
//
//   LocalPostgres pg;
//   if (!pg.ok()) GTEST_SKIP() << pg.why();
//   ASSERT_TRUE(pg.CreateDatabase("t1"));
//   auto store = PgRecordStore::Open(pg.conninfo("t1"));
#pragma once

#include <sys/types.h>

#include <string>

namespace crosstune::testing {

class LocalPostgres {
 public:
  LocalPostgres();
  ~LocalPostgres();
  LocalPostgres(const LocalPostgres&) = delete;
  LocalPostgres& operator=(const LocalPostgres&) = delete;

  // Whether the server runs; why() says what is missing or what failed.
  bool ok() const { return pid_ > 0; }
  const std::string& why() const { return why_; }
  // libpq's key=value form for database `db`, as the superuser `postgres`.
  std::string conninfo(const std::string& db = "postgres") const;
  bool CreateDatabase(const std::string& name);

  // One server for the whole test process, started on first use and stopped at its exit.
  static LocalPostgres& Shared();
  // A fresh database `PREFIX_<random>` on Shared(), as libpq's conninfo; "" when there is no
  // server (Shared().why() says why) or it could not be made.
  static std::string NewDatabase(const std::string& prefix);

 private:
  std::string dir_;
  std::string bin_;
  std::string why_;
  pid_t pid_ = -1;
};

}  // namespace crosstune::testing
