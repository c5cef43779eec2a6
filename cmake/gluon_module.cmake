# gluon_module(NAME SOURCES ... DEPS ...): one static library per module, gluon::NAME, with
# only its declared dependencies, so a layering mistake is a link error.
function(gluon_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(gluon_${name} STATIC ${M_SOURCES})
  add_library(gluon::${name} ALIAS gluon_${name})
  set_target_properties(gluon_${name} PROPERTIES EXPORT_NAME ${name} POSITION_INDEPENDENT_CODE ON)
  target_include_directories(gluon_${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(gluon_${name} PUBLIC ${M_DEPS} PRIVATE ${M_PRIVATE_DEPS})
  install(TARGETS gluon_${name} EXPORT gluonTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
endfunction()
