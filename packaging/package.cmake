# The Debian package: `cpack --config build/CPackConfig.cmake` (scripts/package.sh) makes
# floodgate_<version>_amd64.deb from an already built tree: the binary (stripped), the demo
# config as /etc/floodgate/floodgate.yaml, a hardened systemd unit, /etc/default/floodgate, a
# logrotate snippet, the man page and the docs; dependencies from dpkg-shlibdeps; maintainer
# scripts that create the service's user. Only the proxy: tests, tools and benches install
# nothing.
set(pkg ${CMAKE_CURRENT_LIST_DIR})
set(pkg_out ${PROJECT_BINARY_DIR}/package)
file(MAKE_DIRECTORY ${pkg_out})
# Debian wants the man page and changelog compressed, reproducibly (-n: no name, no time).
foreach(pair "floodgate.1;floodgate.1.gz" "debian/changelog;changelog.gz")
  list(GET pair 0 from)
  list(GET pair 1 to)
  execute_process(COMMAND gzip -9nc ${pkg}/${from} OUTPUT_FILE ${pkg_out}/${to}
                  COMMAND_ERROR_IS_FATAL ANY)
endforeach()

install(TARGETS floodgate RUNTIME DESTINATION bin)
install(FILES ${PROJECT_SOURCE_DIR}/config/floodgate.yaml DESTINATION /etc/floodgate)
# Shipped 0644 as Debian's files are (it holds only comments); the postinst makes it root's
# alone on the first install, since it is where the config's secrets go.
install(FILES ${pkg}/debian/default DESTINATION /etc/default RENAME floodgate)
install(FILES ${pkg}/logrotate/floodgate DESTINATION /etc/logrotate.d)
install(FILES ${pkg}/systemd/floodgate.service DESTINATION /lib/systemd/system)
install(FILES ${pkg_out}/floodgate.1.gz DESTINATION share/man/man1)
install(FILES ${pkg_out}/changelog.gz ${pkg}/debian/copyright
        ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/configuration.md
        DESTINATION share/doc/floodgate)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME floodgate)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "edge rate-limiting reverse proxy")
# The extended description (cpack puts the summary above it); lines within 80 columns.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "floodgate sits in front of an origin, works out who is calling (client
address, route, verified JWT claim, API key, cookie, TLS fingerprint), asks
a limit store (embedded, Redis or Redis Cluster) whether that caller may
pass, and either forwards the request or answers 429 with Retry-After and
rate-limit headers. It speaks HTTP/1.1, HTTP/2 and gRPC, and serves Envoy's
rate limit service.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "floodgate developers <maintainers@floodgate.example>")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
# The system's CAs (config_source, jwt.jwks and https upstreams without a ca_file) and time
# zones (quota limits with a timezone).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "ca-certificates, tzdata")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${pkg}/debian/postinst ${pkg}/debian/prerm ${pkg}/debian/postrm ${pkg}/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# The mode of the directories the package creates (0755).
set(CPACK_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS
    OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
include(CPack)
