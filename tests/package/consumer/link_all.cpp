// Links every library the lockscope package exports; see CMakeLists.txt.
int main() { return 0; }
