// The entry point of the header tests: compiling and linking is the test.
int main() { return 0; }
